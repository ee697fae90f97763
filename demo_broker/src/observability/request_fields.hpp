// RequestFields: the named fields of a live-view control request (POST /api/...), read from its
// query string and its body: a form (application/x-www-form-urlencoded, or no content type) or a
// flat JSON object (application/json) whose values are strings, numbers, booleans or null.
//
//   RequestFields f(req.query, req.content_type, req.body);   // throws for a malformed body
//   const std::string group = f.required("group");            // throws naming the field
//   const auto ms = f.integer("session_timeout_ms", 1, 600000, 10000);
//
// Numbers and booleans are kept as their JSON text ("10000", "true") and judged by the getter
// that reads them, as form values are; a null is an absent field. When a field is given twice,
// the first one counts (the query's before the body's).
//
// Errors: std::invalid_argument whose message is what a 400 answer says: the field and the value
// it had ("field 'min_bytes' must be an integer in 0..104857600, got 'lots'"), or what is wrong
// with the JSON and where ("the body is not valid JSON: expected ':' after the name \"group\" at
// byte 8"). A plain value, thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace purgatory::broker {

class RequestFields {
 public:
  RequestFields(std::string_view query, std::string_view content_type, std::string_view body);

  // The field's value; none when absent (or null in JSON).
  [[nodiscard]] std::optional<std::string> text(std::string_view name) const;
  // The field's value; throws when it is absent or empty.
  [[nodiscard]] std::string required(std::string_view name) const;
  // The integer field `name` in [lo, hi]; `fallback` when absent or empty (throws without one).
  [[nodiscard]] std::int64_t integer(std::string_view name, std::int64_t lo, std::int64_t hi,
                                     std::optional<std::int64_t> fallback) const;
  // The field `name` as a Kafka topic or group name: 1..249 of [a-zA-Z0-9._-].
  [[nodiscard]] std::string name(std::string_view field) const;

 private:
  void parse_form(std::string_view s);
  void parse_json(std::string_view s);

  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace purgatory::broker

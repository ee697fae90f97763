// JsonWriter: a minimal streaming JSON writer for GET /api/state. The caller opens and closes
// objects and arrays; commas are automatic; strings are escaped; floating-point numbers get 3
// decimals. Thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace purgatory::broker {

class JsonWriter {
 public:
  JsonWriter& begin_object(std::string_view key = {}) { return open(key, '{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array(std::string_view key = {}) { return open(key, '['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& str(std::string_view key, std::string_view value) {
    name(key);
    quote(value);
    return *this;
  }
  JsonWriter& str(std::string_view value) { return str({}, value); }
  template <class T>
  JsonWriter& num(std::string_view key, T value) {
    name(key);
    if constexpr (std::is_floating_point_v<T>) {
      out_ += fmt::format("{:.3f}", value);
    } else {
      out_ += fmt::format("{}", value);
    }
    return *this;
  }
  template <class T>
  JsonWriter& num(T value) {
    return num({}, value);
  }
  JsonWriter& boolean(std::string_view key, bool value) {
    name(key);
    out_ += value ? "true" : "false";
    return *this;
  }
  JsonWriter& null(std::string_view key) {
    name(key);
    out_ += "null";
    return *this;
  }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  JsonWriter& open(std::string_view key, char c) {
    name(key);
    out_ += c;
    first_ = true;
    return *this;
  }
  JsonWriter& close(char c) {
    out_ += c;
    first_ = false;
    return *this;
  }
  void name(std::string_view key) {
    if (!first_) out_ += ',';
    first_ = false;
    if (!key.empty()) {
      quote(key);
      out_ += ':';
    }
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          if (c < 0x20) {
            out_ += fmt::format("\\u{:04x}", c);
          } else {
            out_ += ch;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;
};

}  // namespace purgatory::broker

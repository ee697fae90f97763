// RequestFields, how the live view's controls read their fields: from the query string, a form
// body or a flat JSON object, with a 400 message naming the field or where the JSON goes wrong.
#include "observability/request_fields.hpp"

#include <stdexcept>
#include <string>

#include <doctest/doctest.h>

namespace pb = purgatory::broker;

namespace {

// The message a malformed body or a bad field throws; "" when nothing throws.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string json_error(std::string_view body) {
  return error_of([&] { pb::RequestFields("", "application/json", body); });
}

}  // namespace

TEST_CASE("a form body and the query string: decoded, the query's field first") {
  const pb::RequestFields f("group=g1&x=from+query", "application/x-www-form-urlencoded",
                            "topic=a%2Db&x=from%20body&empty=");
  CHECK(f.text("group") == "g1");
  CHECK(f.text("topic") == "a-b");
  CHECK(f.text("x") == "from query");
  CHECK(f.text("empty") == "");
  CHECK_FALSE(f.text("missing").has_value());
  // No content type: a body is read as a form, as curl -d sends it.
  CHECK(pb::RequestFields("", "", "a=1").integer("a", 0, 5, std::nullopt) == 1);
}

TEST_CASE("a JSON object: strings unescaped, numbers and booleans as their text, null absent") {
  const pb::RequestFields f(
      "", "application/json; charset=utf-8",
      R"( {"group":"g\"1\\", "session_timeout_ms": 10000, "neg": -3, "real": 1.5e3,
           "on": true, "off": false, "none": null, "u": "\u00e9\ud83d\ude00\n\/"} )");
  CHECK(f.text("group") == "g\"1\\");
  CHECK(f.integer("session_timeout_ms", 1, 60000, std::nullopt) == 10000);
  CHECK(f.integer("neg", -5, 5, std::nullopt) == -3);
  CHECK(f.text("real") == "1.5e3");
  CHECK(f.text("on") == "true");
  CHECK(f.text("off") == "false");
  CHECK_FALSE(f.text("none").has_value());
  CHECK(f.text("u") == "\xc3\xa9\xf0\x9f\x98\x80\n/");
  CHECK(pb::RequestFields("", "application/json", "{}").text("a") == std::nullopt);
}

TEST_CASE("malformed JSON: the message says what was expected and at which byte") {
  CHECK(json_error("") ==
        "the body is not valid JSON: expected '{' (the body must be a JSON "
        "object) at byte 0");
  CHECK(json_error("[1]") ==
        "the body is not valid JSON: expected '{' (the body must be a JSON "
        "object) at byte 0");
  CHECK(json_error(R"({"group" "g1"})") ==
        "the body is not valid JSON: expected ':' after the name \"group\" at byte 9");
  CHECK(json_error(R"({"group": g1})") ==
        "the body is not valid JSON: expected a value for field 'group' at byte 10");
  CHECK(json_error(R"({"a": 1,})") ==
        "the body is not valid JSON: expected a field name in double quotes at byte 8");
  CHECK(json_error(R"({"a": 1} x)") ==
        "the body is not valid JSON: expected nothing after the object at byte 9");
  CHECK(json_error(R"({"a": "open)") ==
        "the body is not valid JSON: unterminated string at "
        "byte 11");
  CHECK(json_error(R"({"a": {"b": 1}})") ==
        "the body is not valid JSON: field 'a' holds an object or array (only strings, numbers, "
        "booleans and null are accepted) at byte 6");
  CHECK(json_error(R"({"a": "\ud800"})") ==
        "the body is not valid JSON: a lone UTF-16 surrogate at byte 13");
  CHECK(json_error(R"({"a": 01})") == "the body is not valid JSON: expected ',' or '}' at byte 7");
  CHECK(json_error("{\"a\": \"tab\there\"}") ==
        "the body is not valid JSON: a control character in a string at byte 10");
  CHECK(json_error(R"({"a": 1.})") ==
        "the body is not valid JSON: expected a digit after '.' "
        "at byte 8");
}

TEST_CASE("bad fields: named with the value and the range") {
  const pb::RequestFields f("", "application/json",
                            R"({"n": "lots", "big": 99, "real": 1.5, "topic": "no spaces"})");
  CHECK(error_of([&] { (void)f.integer("n", 0, 10, 1); }) ==
        "field 'n' must be an integer in 0..10, got 'lots'");
  CHECK(error_of([&] { (void)f.integer("big", 0, 10, 1); }) ==
        "field 'big' must be an integer in 0..10, got '99'");
  CHECK(error_of([&] { (void)f.integer("real", 0, 10, 1); }) ==
        "field 'real' must be an integer in 0..10, got '1.5'");
  CHECK(error_of([&] { (void)f.integer("absent", 0, 10, std::nullopt); }) ==
        "field 'absent' is required (an integer in 0..10)");
  CHECK(f.integer("absent", 0, 10, 7) == 7);
  CHECK(error_of([&] { (void)f.required("group"); }) == "field 'group' is required");
  CHECK(error_of([&] { (void)f.name("topic"); }) ==
        "field 'topic' is not a valid name: 'no spaces' (1..249 of [a-zA-Z0-9._-])");
}

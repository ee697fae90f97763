#include "observability/request_fields.hpp"

#include <charconv>
#include <stdexcept>

#include <fmt/format.h>

#include "log/log_store.hpp"

namespace purgatory::broker {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string url_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 &&
               hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// One flat JSON object (RFC 8259), its values kept as text. Throws std::invalid_argument saying
// what it expected and at which byte.
class FlatJsonObject {
 public:
  using Fields = std::vector<std::pair<std::string, std::string>>;

  explicit FlatJsonObject(std::string_view s) : s_(s) {}

  void parse_into(Fields& out) {
    skip_space();
    expect('{', "'{' (the body must be a JSON object)");
    skip_space();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        skip_space();
        if (peek() != '"') fail("expected a field name in double quotes");
        std::string name = string();
        skip_space();
        expect(':', fmt::format("':' after the name \"{}\"", name));
        skip_space();
        if (auto value = scalar(name)) out.emplace_back(std::move(name), std::move(*value));
        skip_space();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}', "',' or '}'");
        break;
      }
    }
    skip_space();
    if (i_ != s_.size()) fail("expected nothing after the object");
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw std::invalid_argument(fmt::format("the body is not valid JSON: {} at byte {}", what, i_));
  }
  [[nodiscard]] char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c, std::string_view what) {
    if (peek() != c) fail(fmt::format("expected {}", what));
    ++i_;
  }
  void skip_space() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }

  // A string value or a number, true or false as its text; none for null.
  std::optional<std::string> scalar(std::string_view name) {
    const char c = peek();
    if (c == '"') return string();
    if (c == '{' || c == '[') {
      fail(
          fmt::format("field '{}' holds an object or array (only strings, numbers, booleans "
                      "and null are accepted)",
                      name));
    }
    for (const std::string_view word : {"true", "false", "null"}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        if (word == "null") return std::nullopt;
        return std::string(word);
      }
    }
    return number(name);
  }

  std::string number(std::string_view name) {
    const std::size_t start = i_;
    const auto digits = [this] {
      const std::size_t from = i_;
      while (peek() >= '0' && peek() <= '9')
        ++i_;
      return i_ > from;
    };
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (!digits()) {
      fail(fmt::format("expected a value for field '{}'", name));
    }
    if (peek() == '.') {
      ++i_;
      if (!digits()) fail("expected a digit after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!digits()) fail("expected a digit in the exponent");
    }
    return std::string(s_.substr(start, i_ - start));
  }

  std::uint32_t hex4() {
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = hex_value(peek());
      if (h < 0) fail("expected 4 hex digits after \\u");
      v = v * 16 + static_cast<std::uint32_t>(h);
      ++i_;
    }
    return v;
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) {
        --i_;
        fail("a control character in a string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++i_;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (s_.substr(i_, 2) != "\\u") fail("a lone UTF-16 surrogate");
            i_ += 2;
            const std::uint32_t low = hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("a lone UTF-16 surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("a lone UTF-16 surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --i_;
          fail("an unknown escape in a string");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

RequestFields::RequestFields(std::string_view query, std::string_view content_type,
                             std::string_view body) {
  parse_form(query);
  if (content_type.starts_with("application/json")) {
    parse_json(body);
  } else if (content_type.starts_with("application/x-www-form-urlencoded") ||
             (content_type.empty() && !body.empty())) {
    parse_form(body);
  }
}

void RequestFields::parse_form(std::string_view s) {
  while (!s.empty()) {
    const auto amp = s.find('&');
    const std::string_view pair = s.substr(0, amp);
    s = amp == std::string_view::npos ? std::string_view{} : s.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    fields_.emplace_back(url_decode(pair.substr(0, eq)),
                         eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1)));
  }
}

void RequestFields::parse_json(std::string_view s) {
  FlatJsonObject(s).parse_into(fields_);
}

std::optional<std::string> RequestFields::text(std::string_view name) const {
  for (const auto& [k, v] : fields_) {
    if (k == name) return v;
  }
  return std::nullopt;
}

std::string RequestFields::required(std::string_view name) const {
  auto v = text(name);
  if (!v || v->empty()) throw std::invalid_argument(fmt::format("field '{}' is required", name));
  return std::move(*v);
}

std::int64_t RequestFields::integer(std::string_view name, std::int64_t lo, std::int64_t hi,
                                    std::optional<std::int64_t> fallback) const {
  const auto v = text(name);
  if (!v || v->empty()) {
    if (fallback) return *fallback;
    throw std::invalid_argument(
        fmt::format("field '{}' is required (an integer in {}..{})", name, lo, hi));
  }
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size() || out < lo || out > hi) {
    throw std::invalid_argument(
        fmt::format("field '{}' must be an integer in {}..{}, got '{}'", name, lo, hi, *v));
  }
  return out;
}

std::string RequestFields::name(std::string_view field) const {
  std::string v = required(field);
  if (!is_valid_topic_name(v)) {
    throw std::invalid_argument(
        fmt::format("field '{}' is not a valid name: '{}' (1..249 of [a-zA-Z0-9._-])", field, v));
  }
  return v;
}

}  // namespace purgatory::broker

// The byte script the model fuzzers run: read front to back, every byte past the end is 0, and
// time comes in units of 250 us, so deadlines fall between ticks as well as on them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace purgatory::fuzz {

constexpr std::int64_t kUnit = 250'000;  // ns: the script's time unit

class Script {
 public:
  Script(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  [[nodiscard]] bool done() const { return pos_ >= size_; }
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // 0..247 units, or a 16-bit count of units after an escape byte (up to ~16 s).
  std::int64_t duration() {
    const std::uint8_t b = byte();
    if (b < 0xF8) return b * kUnit;
    const auto hi = static_cast<std::int64_t>(byte());
    return ((hi << 8) | byte()) * kUnit;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace purgatory::fuzz

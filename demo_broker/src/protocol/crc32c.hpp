// CRC-32C (Castagnoli, reflected, init and xor-out 0xFFFFFFFF): the checksum of Kafka record
// batches (magic 2). Check value: crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstdint>

#include "protocol/wire.hpp"

namespace purgatory::broker {

// Thread-safe (a pure function). Boost.CRC's table-driven loop, one byte per step.
[[nodiscard]] std::uint32_t crc32c(ByteView data) noexcept;

}  // namespace purgatory::broker

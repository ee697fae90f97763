#include "protocol/crc32c.hpp"

#include <boost/crc.hpp>

namespace purgatory::broker {

std::uint32_t crc32c(ByteView data) noexcept {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

}  // namespace purgatory::broker

#include "ledger.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace broker_load {

Ledger::Ledger(int partitions) {
  log_.resize(static_cast<std::size_t>(partitions));
  acked_.resize(static_cast<std::size_t>(partitions));
}

void Ledger::acked(int partition, std::int64_t base_offset, std::int32_t producer,
                   std::int64_t first_seq, std::int64_t count) {
  acked_[static_cast<std::size_t>(partition)].push_back(
      Acked{base_offset, producer, first_seq, count});
}

std::int64_t Ledger::acked_end(int partition) const {
  std::int64_t end = 0;
  for (const Acked& a : acked_[static_cast<std::size_t>(partition)])
    end = std::max(end, a.base_offset + a.count);
  return end;
}

bool Ledger::consumed(int partition, std::int64_t offset, const RecordId& id) {
  auto& log = log_[static_cast<std::size_t>(partition)];
  const auto off = static_cast<std::size_t>(offset);
  if (off == log.size()) {
    log.push_back(id);
    return true;
  }
  return log[off] == id;
}

std::size_t Ledger::read_end(int partition) const {
  return log_[static_cast<std::size_t>(partition)].size();
}

std::uint64_t Ledger::verify(Failures& failures) const {
  std::uint64_t acked_records = 0;
  for (std::size_t part = 0; part < acked_.size(); ++part) {
    std::vector<bool> covered(log_[part].size(), false);
    for (const Acked& a : acked_[part]) {
      for (std::int64_t i = 0; i < a.count; ++i) {
        const auto off = static_cast<std::size_t>(a.base_offset + i);
        if (off >= log_[part].size()) {
          failures.add(fmt::format("partition {}: acked offset {} never consumed", part, off));
          break;
        }
        if (covered[off])
          failures.add(fmt::format("partition {}: offset {} acked twice", part, off));
        covered[off] = true;
        if (!(log_[part][off] == RecordId{a.producer, a.first_seq + i})) {
          failures.add(
              fmt::format("partition {}: offset {} holds another record than acked", part, off));
        }
      }
      acked_records += static_cast<std::uint64_t>(a.count);
    }
    const auto unacked = std::count(covered.begin(), covered.end(), false);
    if (unacked > 0)
      failures.add(fmt::format("partition {}: {} consumed record(s) never acked", part, unacked));
  }
  return acked_records;
}

}  // namespace broker_load

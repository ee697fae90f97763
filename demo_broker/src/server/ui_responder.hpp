// UiResponder: the Responder of the live view's control requests (the page's "produce" and
// "long-poll fetch" buttons). They go through the same handlers and purgatories as a client's,
// but nobody reads their answers: this responder drops every response, and holds the operations
// parked for it until they complete (at most kMaxParked at once, so a page cannot grow the
// broker's memory).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "requests/responder.hpp"

namespace purgatory::broker {

// Call only from the broker's io thread.
class UiResponder final : public Responder {
 public:
  static constexpr std::size_t kMaxParked = 100;

  [[nodiscard]] bool is_open() const noexcept override { return open_; }
  [[nodiscard]] std::uint64_t id() const noexcept override { return 0; }
  [[nodiscard]] const std::string& peer() const noexcept override { return peer_; }
  void close(std::string_view /*reason*/) override {
    if (!open_) return;
    open_ = false;
    auto parked = std::move(parked_);
    parked_.clear();
    for (auto& [seq, op] : parked)
      op->force_complete();
  }
  void park(const ResponseSlot& slot, OperationRef op) override {
    if (open_) parked_.emplace(slot.seq, std::move(op));
  }
  void respond(const ResponseSlot& slot, Bytes, std::string_view) override {
    parked_.erase(slot.seq);
  }
  void respond_deferred(const ResponseSlot& slot, std::string, ResponseBuilder) override {
    parked_.erase(slot.seq);
  }
  void respond_nothing(const ResponseSlot& slot, std::string_view) override {
    parked_.erase(slot.seq);
  }

  [[nodiscard]] std::uint64_t next_seq() noexcept { return ++seq_; }
  [[nodiscard]] std::size_t parked() const noexcept { return parked_.size(); }

 private:
  bool open_ = true;
  std::string peer_ = "ui";
  std::uint64_t seq_ = 0;
  std::unordered_map<std::uint64_t, OperationRef> parked_;
};

}  // namespace purgatory::broker

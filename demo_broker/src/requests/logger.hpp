// Logger: where the broker's lines go. log() writes a line whatever --verbose says (an error, a
// refused request, a closed connection); event() tells the timeline (BrokerConfig::on_event) of
// what is worth watching (appends, follower catch-up, high-watermark moves) and logs it too when
// verbose. Every part of the broker writes through the one Logger its Broker owns.
#pragma once

#include <cstdio>
#include <functional>
#include <string_view>
#include <utility>

namespace purgatory::broker {

// Call only from the broker's io thread (the sinks are called there, with no lock held).
class Logger {
 public:
  using Sink = std::function<void(std::string_view)>;

  // `sink`: where log lines go (without a trailing newline); null: stderr. `on_event`: told of
  // each event; may be null.
  Logger(Sink sink, Sink on_event, bool verbose)
      : sink_(std::move(sink)), on_event_(std::move(on_event)), verbose_(verbose) {}

  void log(std::string_view line) const {
    if (sink_) {
      sink_(line);
    } else {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    }
  }
  void event(std::string_view text) const {
    if (on_event_) on_event_(text);
    if (verbose_) log(text);
  }
  // --verbose: one line per request, and every event.
  [[nodiscard]] bool verbose() const noexcept { return verbose_; }

 private:
  Sink sink_;
  Sink on_event_;
  bool verbose_;
};

}  // namespace purgatory::broker

// Small helpers shared by the contract tests (besides manual_timer.hpp and each component's own).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

#include "manual_timer.hpp"

namespace purgatory::contract {

// A one-shot event: set() once, wait() from any thread (a latch of one).
using Signal = test::Latch;

// Captures what is written to stderr (fd 2) while it exists.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = ::dup(2);
    ::dup2(::fileno(file_), 2);
  }
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Stops capturing and returns what was written.
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[512];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0)
      out.append(buf, n);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

}  // namespace purgatory::contract

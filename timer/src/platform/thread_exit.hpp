// Internal (platform layer): per-thread state that is cleaned up when its thread ends.
//
// The library keeps a little state per thread (the task pool's heap, the timer's thread slot) and
// must clean it up when the thread ends. Not with thread_local objects that have destructors:
// MinGW-w64's GCC (emulated TLS over winpthreads) runs those after the thread's TLS was freed, and
// the process crashes at thread exit (GCC PR 80816). Instead the state is trivially destructible,
// and a thread's first use of it registers a cleanup with the platform's own thread-exit
// mechanism: a pthread key's destructor on POSIX, a fiber-local storage callback on Windows. A
// thread that never uses the state pays nothing, and the steady state costs one thread_local read
// and compare.
#pragma once

#include <cstddef>
#include <cstdint>  // also defines __GLIBC__ where the C library is glibc
#include <cstdlib>
#include <new>
#include <type_traits>

namespace purgatory::platform {

// A cleanup for at_thread_exit().
struct ThreadExitHook {
  void (*run)(ThreadExitHook& self) noexcept = nullptr;
  ThreadExitHook* next = nullptr;  // the platform layer's
};

// Calls hook.run(hook) on the calling thread when the thread ends. `hook` must stay valid until
// then. A thread's hooks run in reverse order of registration, the last registered first; a hook
// may register more, which run after the hooks registered before them. On glibc they run after the
// thread's thread_local destructors. The process's main thread runs none when the process exits
// (exit() does not end threads). Returns false, and the hook never runs, if the platform has no
// thread-exit mechanism left for the library (every pthread key or FLS index taken).
bool at_thread_exit(ThreadExitHook& hook) noexcept;

// One pointer per thread, kept by the operating system (a pthread key without a destructor, a
// Windows TLS index) instead of in a C++ thread_local: it stays readable until the thread is gone,
// also after MinGW's emulated TLS was freed. Null until set. Make it once (a function-local
// static); it is never freed.
class NativeThreadSlot {
 public:
  NativeThreadSlot() noexcept;
  NativeThreadSlot(const NativeThreadSlot&) = delete;
  NativeThreadSlot& operator=(const NativeThreadSlot&) = delete;

  // False if the system had no slot left: then get() is always null and set() does nothing.
  [[nodiscard]] bool valid() const noexcept { return valid_; }
  [[nodiscard]] void* get() const noexcept;
  void set(void* value) const noexcept;

 private:
  std::uintptr_t key_ = 0;
  bool valid_ = false;
};

// PerThread<T, Cleanup>::get(): the calling thread's T, value-initialised at the thread's first
// call, which registers Cleanup(t) to run when the thread ends (at_thread_exit()). Null on a
// thread whose cleanup has run (code that runs late in the thread's exit, after it), and where no
// cleanup could be registered. T is trivially destructible: nothing else happens at thread exit.
//
// On glibc the T sits in a thread_local (a thread's TLS outlives its pthread key destructors), so
// get() is a read and a compare. Elsewhere it is allocated (with malloc, not operator new, which
// tests replace to count what the library allocates) at the thread's first call, found through a
// NativeThreadSlot, and freed after Cleanup.
template <class T, void (*Cleanup)(T&) noexcept>
class PerThread {
  static_assert(std::is_trivially_destructible_v<T>);
  static_assert(alignof(T) <= alignof(std::max_align_t), "made with malloc on some platforms");

 public:
  [[nodiscard]] static T* get() noexcept {
#if defined(__GLIBC__)
    Cell& c = t_cell;
    if (c.state == kLive) [[likely]]
      return &c.value;
    return c.state == kFresh ? first_use(c) : nullptr;
#else
    const auto v = reinterpret_cast<std::uintptr_t>(slot().get());
    if (v > kEnded) [[likely]]
      return &reinterpret_cast<Cell*>(v)->value;
    return v == kFresh ? first_use() : nullptr;
#endif
  }

 private:
  enum : std::uint8_t { kFresh = 0, kEnded = 1, kLive = 2 };

#if defined(__GLIBC__)
  struct Cell : ThreadExitHook {
    T value{};
    std::uint8_t state = kFresh;
  };
  static constinit inline thread_local Cell t_cell{};

  [[gnu::noinline]] static T* first_use(Cell& c) noexcept {
    c.run = &on_exit;
    if (!at_thread_exit(c)) {
      c.state = kEnded;
      return nullptr;
    }
    c.state = kLive;
    return &c.value;
  }
  static void on_exit(ThreadExitHook& hook) noexcept {
    Cell& c = static_cast<Cell&>(hook);
    c.state = kEnded;  // from here on get() says the thread is ending, also inside Cleanup
    Cleanup(c.value);
  }
#else
  struct Cell : ThreadExitHook {
    T value{};
  };
  static NativeThreadSlot& slot() noexcept {
    static NativeThreadSlot s;
    return s;
  }
  static void* ended_mark() noexcept {
    return reinterpret_cast<void*>(std::uintptr_t{kEnded});
  }

  static T* first_use() noexcept {
    if (!slot().valid()) return nullptr;
    void* memory = std::malloc(sizeof(Cell));
    if (memory == nullptr) return nullptr;  // out of memory: as if the thread were ending
    Cell* c = new (memory) Cell();
    c->run = &on_exit;
    if (!at_thread_exit(*c)) {
      std::free(c);
      slot().set(ended_mark());
      return nullptr;
    }
    slot().set(c);
    return &c->value;
  }
  static void on_exit(ThreadExitHook& hook) noexcept {
    Cell* c = static_cast<Cell*>(&hook);
    slot().set(ended_mark());  // from here on get() says the thread is ending, also in Cleanup
    Cleanup(c->value);
    std::free(c);  // trivially destructible
  }
#endif
};

}  // namespace purgatory::platform

#include "thread_exit.hpp"

#include <new>

#if defined(_WIN32)
#include <windows.h>
#else
#include <pthread.h>
#endif

namespace purgatory::platform {
namespace {

// A thread's hooks are a list whose head is the value of one process-wide key: a pthread key on
// POSIX (its destructor runs the list), a fiber-local storage index on Windows (its callback
// does). FLS rather than a winpthreads key: winpthreads runs key destructors in the order the keys
// were made, and the key of GCC's emulated TLS, made earlier, frees the thread's TLS first.

void run_hooks(ThreadExitHook* head) noexcept;

#if defined(_WIN32)

void NTAPI run_hooks_at_exit(void* head) {
  run_hooks(static_cast<ThreadExitHook*>(head));
}

struct ExitKey {
  DWORD index = ::FlsAlloc(&run_hooks_at_exit);
  [[nodiscard]] bool valid() const noexcept { return index != FLS_OUT_OF_INDEXES; }
  [[nodiscard]] ThreadExitHook* get() const noexcept {
    return static_cast<ThreadExitHook*>(::FlsGetValue(index));
  }
  [[nodiscard]] bool set(ThreadExitHook* head) const noexcept {
    return ::FlsSetValue(index, head) != 0;
  }
};

#else

void run_hooks_at_exit(void* head) {
  run_hooks(static_cast<ThreadExitHook*>(head));
}

struct ExitKey {
  pthread_key_t key{};
  bool made = ::pthread_key_create(&key, &run_hooks_at_exit) == 0;
  [[nodiscard]] bool valid() const noexcept { return made; }
  [[nodiscard]] ThreadExitHook* get() const noexcept {
    return static_cast<ThreadExitHook*>(::pthread_getspecific(key));
  }
  [[nodiscard]] bool set(ThreadExitHook* head) const noexcept {
    return ::pthread_setspecific(key, head) == 0;
  }
};

#endif

// Never destroyed (threads end after static destructors ran), and not from operator new, which
// tests replace to count what the library allocates.
const ExitKey& exit_key() noexcept {
  alignas(ExitKey) static unsigned char storage[sizeof(ExitKey)];
  static const ExitKey* const key = new (storage) ExitKey();
  return *key;
}

void run_hooks(ThreadExitHook* head) noexcept {
  const ExitKey& key = exit_key();
  // Windows leaves the value in place while the callback runs; POSIX has cleared it.
  (void)key.set(nullptr);
  // Hooks registered by the hooks go to a new list, run next (a few rounds, as POSIX allows).
  for (int round = 0; head != nullptr && round < 8; ++round) {
    while (head != nullptr) {
      ThreadExitHook* hook = head;
      head = hook->next;
      hook->run(*hook);
    }
    head = key.get();
    (void)key.set(nullptr);
  }
}

}  // namespace

bool at_thread_exit(ThreadExitHook& hook) noexcept {
  const ExitKey& key = exit_key();
  if (!key.valid()) return false;
  hook.next = key.get();
  return key.set(&hook);
}

#if defined(_WIN32)

NativeThreadSlot::NativeThreadSlot() noexcept {
  const DWORD index = ::TlsAlloc();
  valid_ = index != TLS_OUT_OF_INDEXES;
  key_ = index;
}

void* NativeThreadSlot::get() const noexcept {
  return ::TlsGetValue(static_cast<DWORD>(key_));
}

void NativeThreadSlot::set(void* value) const noexcept {
  if (valid_) (void)::TlsSetValue(static_cast<DWORD>(key_), value);
}

#else

NativeThreadSlot::NativeThreadSlot() noexcept {
  pthread_key_t key{};
  valid_ = ::pthread_key_create(&key, nullptr) == 0;
  key_ = static_cast<std::uintptr_t>(key);
}

void* NativeThreadSlot::get() const noexcept {
  return valid_ ? ::pthread_getspecific(static_cast<pthread_key_t>(key_)) : nullptr;
}

void NativeThreadSlot::set(void* value) const noexcept {
  if (valid_) (void)::pthread_setspecific(static_cast<pthread_key_t>(key_), value);
}

#endif

}  // namespace purgatory::platform

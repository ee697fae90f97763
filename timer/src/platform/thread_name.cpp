#include "thread_name.hpp"

#include <algorithm>
#include <future>
#include <utility>

#if defined(_WIN32)
#include <windows.h>
#else
#include <pthread.h>
#endif

namespace purgatory::platform {

#if defined(_WIN32)

namespace {

// SetThreadDescription and GetThreadDescription came with Windows 10 1607: looked up at run time
// so that the library still loads on older systems.
using SetDescription = HRESULT(WINAPI*)(HANDLE, PCWSTR);
using GetDescription = HRESULT(WINAPI*)(HANDLE, PWSTR*);

template <class Fn>
Fn kernel32_function(const char* name) noexcept {
  HMODULE kernel32 = ::GetModuleHandleW(L"kernel32.dll");
  if (kernel32 == nullptr) return nullptr;
  return reinterpret_cast<Fn>(reinterpret_cast<void*>(::GetProcAddress(kernel32, name)));
}

}  // namespace

void name_this_thread(std::string_view name) noexcept {
  static const auto set = kernel32_function<SetDescription>("SetThreadDescription");
  if (set == nullptr || name.size() > 1024) return;
  wchar_t wide[1025];
  const int n =
      ::MultiByteToWideChar(CP_UTF8, 0, name.data(), static_cast<int>(name.size()), wide, 1024);
  wide[n > 0 ? n : 0] = L'\0';
  (void)set(::GetCurrentThread(), wide);
}

std::string this_thread_name() {
  static const auto get = kernel32_function<GetDescription>("GetThreadDescription");
  PWSTR wide = nullptr;
  if (get == nullptr || FAILED(get(::GetCurrentThread(), &wide)) || wide == nullptr) return {};
  std::string name;
  const int n = ::WideCharToMultiByte(CP_UTF8, 0, wide, -1, nullptr, 0, nullptr, nullptr);
  if (n > 1) {
    name.resize(static_cast<std::size_t>(n));
    ::WideCharToMultiByte(CP_UTF8, 0, wide, -1, name.data(), n, nullptr, nullptr);
    name.resize(static_cast<std::size_t>(n - 1));  // the terminator
  }
  ::LocalFree(wide);
  return name;
}

#elif defined(__APPLE__)

void name_this_thread(std::string_view name) noexcept {
  char buf[64] = {};
  name.copy(buf, sizeof(buf) - 1);
  (void)::pthread_setname_np(buf);  // macOS names only the calling thread
}

std::string this_thread_name() {
  char buf[64] = {};
  (void)::pthread_getname_np(::pthread_self(), buf, sizeof(buf));
  return buf;
}

#elif defined(__linux__)

void name_this_thread(std::string_view name) noexcept {
  char buf[16] = {};  // the kernel keeps 15 bytes
  name.copy(buf, sizeof(buf) - 1);
  (void)::pthread_setname_np(::pthread_self(), buf);
}

std::string this_thread_name() {
  char buf[16] = {};
  (void)::pthread_getname_np(::pthread_self(), buf, sizeof(buf));
  return buf;
}

#else

void name_this_thread(std::string_view /*name*/) noexcept {}

std::string this_thread_name() {
  return {};
}

#endif

std::thread start_named_thread(std::string name, std::function<void()> body) {
  name.resize(std::min<std::size_t>(name.size(), 15));
  std::promise<void> named;
  std::future<void> done = named.get_future();
  std::thread thread(
      [name = std::move(name), body = std::move(body), named = std::move(named)]() mutable {
        name_this_thread(name);
        named.set_value();
        body();
      });
  done.wait();
  return thread;
}

}  // namespace purgatory::platform

/// @file
/// Ref: shared ownership of a timer task or a delayed operation.
#pragma once

#include <compare>
#include <concepts>
#include <cstddef>
#include <functional>
#include <utility>

namespace purgatory {

/// A class whose pointers convert to `To*` (itself, or a class derived from To): a Ref to it
/// converts to a Ref<To>.
template <class From, class To>
concept PointerConvertibleTo = std::convertible_to<From*, To*>;

/// Shared ownership of an object that carries its own reference count: a TimerTask, a
/// DelayedOperation, or a class derived from either. make_task(), make_periodic() and
/// make_operation() return one; hold one while you use the object, drop it when you no longer
/// need it (the timer and the purgatory keep their own while they need the object).
///
/// Like std::shared_ptr, with the count inside the object: a copy costs one atomic increment and
/// no allocation, a Ref<Base> is made from a Ref<Derived>, and the last Ref deletes the object.
/// Thread-compatible, as std::shared_ptr: distinct Refs to one object may be used on any threads.
template <class T>
class Ref {
 public:
  /// The type referenced.
  using element_type = T;

  /// An empty Ref.
  constexpr Ref() noexcept = default;
  /// An empty Ref.
  constexpr Ref(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)
  /// A new reference to `object`, which may be shared already (from inside a callback, say).
  /// With add_ref false it adopts a reference counted before (for the library's own use).
  explicit Ref(T* object, bool add_ref = true) noexcept : object_(object) {
    if (object_ != nullptr && add_ref) intrusive_ptr_add_ref(object_);
  }
  /// Another reference to what `other` references.
  Ref(const Ref& other) noexcept : Ref(other.object_) {}
  /// Takes over `other`'s reference; `other` is left empty.
  Ref(Ref&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  /// A reference to a derived class's object as its base.
  template <PointerConvertibleTo<T> U>
  Ref(const Ref<U>& other) noexcept  // NOLINT(google-explicit-constructor)
      : Ref(other.get()) {}
  /// Takes over a derived class's reference.
  template <PointerConvertibleTo<T> U>
  Ref(Ref<U>&& other) noexcept  // NOLINT(google-explicit-constructor)
      : object_(other.detach()) {}
  /// Drops the reference.
  ~Ref() {
    if (object_ != nullptr) intrusive_ptr_release(object_);
  }

  /// References what `other` references, dropping the reference held before.
  Ref& operator=(Ref other) noexcept {
    swap(other);
    return *this;
  }

  /// The object, or null.
  [[nodiscard]] T* get() const noexcept { return object_; }
  /// The object; the Ref must not be empty.
  T& operator*() const noexcept { return *object_; }
  /// The object; the Ref must not be empty.
  T* operator->() const noexcept { return object_; }
  /// Whether the Ref references an object.
  explicit operator bool() const noexcept { return object_ != nullptr; }

  /// Drops the reference; the Ref is empty after.
  void reset() noexcept { Ref().swap(*this); }
  /// Exchanges the objects of two Refs.
  void swap(Ref& other) noexcept { std::swap(object_, other.object_); }
  /// Empties the Ref without dropping its reference, and returns the object: the caller now owns
  /// that reference (for the library's own use).
  [[nodiscard]] T* detach() noexcept { return std::exchange(object_, nullptr); }

  /// Whether two Refs reference the same object.
  template <class U>
  friend bool operator==(const Ref& a, const Ref<U>& b) noexcept {
    return a.get() == b.get();
  }
  /// Whether the Ref is empty.
  friend bool operator==(const Ref& a, std::nullptr_t) noexcept { return a.get() == nullptr; }
  /// Orders Refs by address (for ordered containers).
  friend std::strong_ordering operator<=>(const Ref& a, const Ref& b) noexcept {
    return std::compare_three_way{}(a.get(), b.get());
  }

 private:
  T* object_ = nullptr;
};

}  // namespace purgatory

/// @cond
namespace std {
// Refs hash by the address of their object.
template <class T>
struct hash<purgatory::Ref<T>> {
  std::size_t operator()(const purgatory::Ref<T>& ref) const noexcept {
    return std::hash<T*>{}(ref.get());
  }
};
}  // namespace std
/// @endcond

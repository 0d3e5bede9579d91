// Fields that are empty on almost every object of a big array, held in one pointer.
//
// A graph of a million values or ops pays for every byte of its Value and Op structs, and most
// of their optional parts (a declared shape, an ONNX domain, a Caffe2 engine) are empty on all
// but a few. `Boxed<T>` is an optional T kept on the heap: 8 bytes where std::optional of a
// vector takes 32; `RareString` is a string that is 8 bytes while empty (std::string: 32);
// `RareVector` a vector that is 8 bytes while empty (an inline list of ids: 24).
// All three copy deeply and compare by value, so the structs holding them stay plain values.
#ifndef MEMONGER_UTIL_BOXED_H_
#define MEMONGER_UTIL_BOXED_H_

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace memonger::util {

// The subset of std::optional's interface the graph uses, with the value on the heap.
template <typename T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(std::nullopt_t) {}  // NOLINT: as std::optional converts
  Boxed(T value) : box_(std::make_unique<T>(std::move(value))) {}  // NOLINT: as std::optional
  Boxed(const Boxed& other) : box_(other.box_ ? std::make_unique<T>(*other.box_) : nullptr) {}
  Boxed& operator=(const Boxed& other) {
    if (this != &other) box_ = other.box_ ? std::make_unique<T>(*other.box_) : nullptr;
    return *this;
  }
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(Boxed&&) noexcept = default;
  Boxed& operator=(std::nullopt_t) {
    box_.reset();
    return *this;
  }
  Boxed& operator=(T value) {
    box_ = std::make_unique<T>(std::move(value));
    return *this;
  }

  bool has_value() const { return box_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  void reset() { box_.reset(); }
  // REQUIRES: has_value(), as for std::optional.
  const T& operator*() const { return *box_; }
  T& operator*() { return *box_; }
  const T* operator->() const { return box_.get(); }
  T* operator->() { return box_.get(); }

  friend bool operator==(const Boxed& a, const Boxed& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || *a == *b);
  }
  friend bool operator!=(const Boxed& a, const Boxed& b) { return !(a == b); }

 private:
  std::unique_ptr<T> box_;
};

// A string that costs one pointer while empty.
class RareString {
 public:
  RareString() = default;
  RareString(std::string text) { *this = std::move(text); }  // NOLINT: assigned like a string
  explicit RareString(const char* text) : RareString(std::string(text)) {}
  RareString(const RareString& other) : RareString(other.str()) {}
  RareString& operator=(const RareString& other) {
    if (this != &other) *this = other.str();
    return *this;
  }
  RareString(RareString&&) noexcept = default;
  RareString& operator=(RareString&&) noexcept = default;
  RareString& operator=(std::string text) {
    if (text.empty()) {
      text_.reset();
    } else {
      text_ = std::make_unique<std::string>(std::move(text));
    }
    return *this;
  }

  bool empty() const { return text_ == nullptr; }
  const std::string& str() const { return text_ ? *text_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads as a string

  friend bool operator==(const RareString& a, absl::string_view b) { return a.str() == b; }
  friend bool operator==(absl::string_view a, const RareString& b) { return a == b.str(); }
  friend bool operator!=(const RareString& a, absl::string_view b) { return !(a == b); }
  friend bool operator!=(absl::string_view a, const RareString& b) { return !(a == b); }
  friend bool operator==(const RareString& a, const RareString& b) { return a.str() == b.str(); }
  friend bool operator!=(const RareString& a, const RareString& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const RareString& s) { return os << s.str(); }

 private:
  static const std::string& Empty() {
    static const std::string* const kEmpty = new std::string();
    return *kEmpty;
  }
  std::unique_ptr<std::string> text_;  // null while empty; never points at an empty string
};

// A vector that costs one pointer while empty: the subset of std::vector's interface the graph
// uses (an op's control inputs, which almost no op of a big net has). A non-empty one costs a
// heap vector besides its items: for lists most objects have, a plain vector is smaller.
template <typename T>
class RareVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  RareVector() = default;
  RareVector(std::initializer_list<T> items) {  // NOLINT: as std::vector
    if (items.size() > 0) items_ = std::make_unique<std::vector<T>>(items);
  }
  RareVector(const RareVector& other)
      : items_(other.items_ ? std::make_unique<std::vector<T>>(*other.items_) : nullptr) {}
  RareVector& operator=(const RareVector& other) {
    if (this != &other) {
      items_ = other.items_ ? std::make_unique<std::vector<T>>(*other.items_) : nullptr;
    }
    return *this;
  }
  RareVector(RareVector&&) noexcept = default;
  RareVector& operator=(RareVector&&) noexcept = default;

  bool empty() const { return items_ == nullptr; }
  size_t size() const { return items_ ? items_->size() : 0; }
  // Null while empty: a range over nothing.
  const T* begin() const { return items_ ? items_->data() : nullptr; }
  const T* end() const { return items_ ? items_->data() + items_->size() : nullptr; }
  T* begin() { return items_ ? items_->data() : nullptr; }
  T* end() { return items_ ? items_->data() + items_->size() : nullptr; }
  // REQUIRES: i < size().
  const T& operator[](size_t i) const { return (*items_)[i]; }
  T& operator[](size_t i) { return (*items_)[i]; }

  void push_back(T item) {
    if (!items_) items_ = std::make_unique<std::vector<T>>();
    items_->push_back(std::move(item));
  }
  void clear() { items_.reset(); }

  friend bool operator==(const RareVector& a, const RareVector& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const RareVector& a, const RareVector& b) { return !(a == b); }

 private:
  std::unique_ptr<std::vector<T>> items_;  // null while empty; never points at an empty vector
};

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_BOXED_H_

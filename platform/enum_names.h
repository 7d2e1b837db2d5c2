// One table per enum of its values and their names: Name and Parse read it,
// so a value and its spelling are written once.
//
//   constexpr EnumName<Color> kColors[] = {{Color::kRed, "red"}, {Color::kBlue, "blue"}};
//   NameOf(kColors, Color::kRed) == "red";  ParseName(kColors, "blue", &c) == true
#ifndef KVEDGE_PLATFORM_ENUM_NAMES_H_
#define KVEDGE_PLATFORM_ENUM_NAMES_H_

#include <cstddef>
#include <string_view>

namespace kvedge {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `v`, or `missing` for a value the table lacks (a value read
// from a file or cast from an int).
template <typename E, size_t N>
constexpr const char* NameOf(const EnumName<E> (&table)[N], E v, const char* missing = "?") {
  for (const EnumName<E>& e : table) {
    if (e.value == v) return e.name;
  }
  return missing;
}

// Sets *out to the value named `name` (exact match); false if none is.
template <typename E, size_t N>
constexpr bool ParseName(const EnumName<E> (&table)[N], std::string_view name, E* out) {
  for (const EnumName<E>& e : table) {
    if (name == e.name) {
      *out = e.value;
      return true;
    }
  }
  return false;
}

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_ENUM_NAMES_H_

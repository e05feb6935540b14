// SPDX-License-Identifier: Apache-2.0
// The element types a tensor can hold. Everything that depends on the type (its size, its name, the C++ type of
// host access, the check a submit function makes) goes through the tables here, so that a new type is one enum
// value plus one row in each table: kernels take typed pointers from runtime::vector_ptr_as<T>, never float* where
// the type could vary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace dtnn {

enum class DType : std::uint8_t {
  kFloat32 = 0,  // values, parameters, gradients, logits
  kInt32 = 1,    // token ids and targets
  // Activations and their gradients between two layers that both take bf16 (--precision bf16: Layer::writes_bf16
  // and reads_bf16): the upper half of an fp32, rounded to nearest even (codelets/cpu/bf16.hpp).
  kBFloat16 = 2,
};

// A bf16 element as host code sees it: the 16 bits, no arithmetic (kernels convert through codelets/cpu/bf16.hpp).
struct bfloat16 {
  std::uint16_t bits;
};

[[nodiscard]] constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kInt32: return 4;
    case DType::kBFloat16: return 2;
  }
  return 0;
}

[[nodiscard]] constexpr std::string_view to_string(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kInt32: return "int32";
    case DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

// The DType of a C++ element type (host access, typed buffer pointers): dtype_of<float> is kFloat32.
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<bfloat16> {
  static constexpr DType value = DType::kBFloat16;
};
template <class T>
inline constexpr DType dtype_of = DTypeOf<std::remove_const_t<T>>::value;

}  // namespace dtnn

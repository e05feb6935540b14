// SPDX-License-Identifier: Apache-2.0
#include "io/hdf5.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/new_file.hpp"

namespace dtnn::io::h5 {

static_assert(std::is_same_v<Id, hid_t>, "h5::Id must be hid_t (HDF5 >= 1.10)");
static_assert(std::is_same_v<Handle::Closer, herr_t (*)(hid_t)>, "h5::Handle::Closer must match H5*close");

namespace {

// Bounds on what a single attribute read may allocate: attribute sizes come from the file, and a damaged
// file written by a tool that skips metadata checksums must not turn into a huge allocation.
constexpr std::int64_t kMaxAttributeElements = std::int64_t{1} << 24;

// In a thread-safe HDF5 build (Debian's is one) the automatic error printing is a setting of each thread's
// error stack, so it is switched off on every entry from a thread that has not done it yet; a data loader
// may read from a worker thread.
void silence() {
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

herr_t collect_error(unsigned n, const H5E_error2_t* entry, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  if (entry->desc != nullptr && entry->desc[0] != '\0' && out->size() < 64) {
    std::string desc = entry->desc;
    // A failed system call: "file write failed: time = ..., errno = 28, error message = 'No space left on device',
    // buf = ...": the system's words are the reason.
    const std::string key = "error message = '";
    const std::size_t at = desc.find(key);
    const std::size_t end = at == std::string::npos ? at : desc.find('\'', at + key.size());
    if (end != std::string::npos) desc = desc.substr(at + key.size(), end - at - key.size());
    out->push_back(std::move(desc));
  }
  return 0;
}

// HDF5's explanation of the last failure on this thread ("what failed: why"); clears the stack.
std::string hdf5_detail() {
  std::vector<std::string> messages;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &messages);
  H5Eclear2(H5E_DEFAULT);
  if (messages.empty()) {
    return {};
  }
  // The innermost entry says what was found ("truncated file: eof = ..."), the outermost what could not be
  // done ("unable to open file"); the ones between repeat them.
  std::string detail = messages.front();
  if (messages.size() > 1 && messages.back() != messages.front()) {
    detail = messages.back() + ": " + detail;
  }
  return detail;
}

[[noreturn]] void throw_error(const std::string& file, const std::string& path, std::string_view what) {
  const std::string detail = hdf5_detail();
  const std::string where = path.empty() || path == "/" ? std::string{} : path + ": ";
  throw DataError(fmt::format("{}: {}{}{}", file, where, what, detail.empty() ? "" : " (HDF5: " + detail + ")"));
}

Handle own(hid_t id, Handle::Closer close) { return Handle(id, close); }

template <class T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, float>) {
    return H5T_NATIVE_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return H5T_NATIVE_DOUBLE;
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return H5T_NATIVE_UINT8;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return H5T_NATIVE_INT32;
  } else {
    static_assert(std::is_same_v<T, std::int64_t>, "unsupported element type");
    return H5T_NATIVE_INT64;
  }
}

hid_t file_type(DType type) {
  switch (type) {
    case DType::kUInt8: return H5T_STD_U8LE;
    case DType::kInt8: return H5T_STD_I8LE;
    case DType::kInt16: return H5T_STD_I16LE;
    case DType::kUInt16: return H5T_STD_U16LE;
    case DType::kInt32: return H5T_STD_I32LE;
    case DType::kUInt32: return H5T_STD_U32LE;
    case DType::kInt64: return H5T_STD_I64LE;
    case DType::kUInt64: return H5T_STD_U64LE;
    case DType::kFloat32: return H5T_IEEE_F32LE;
    case DType::kFloat64: return H5T_IEEE_F64LE;
    case DType::kString:
    case DType::kOther: break;
  }
  throw InvalidArgument(fmt::format("h5: cannot create a dataset of type {}", to_string(type)));
}

DType classify(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_STRING) {
    return DType::kString;
  }
  if (cls == H5T_FLOAT) {
    return size == 4 ? DType::kFloat32 : size == 8 ? DType::kFloat64 : DType::kOther;
  }
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    switch (size) {
      case 1: return is_signed ? DType::kInt8 : DType::kUInt8;
      case 2: return is_signed ? DType::kInt16 : DType::kUInt16;
      case 4: return is_signed ? DType::kInt32 : DType::kUInt32;
      case 8: return is_signed ? DType::kInt64 : DType::kUInt64;
      default: return DType::kOther;
    }
  }
  return DType::kOther;
}

bool is_numeric(DType type) { return type != DType::kString && type != DType::kOther; }

std::vector<std::int64_t> space_shape(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank <= 0) {
    return {};
  }
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

std::int64_t product(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    n *= d;
  }
  return n;
}

void check_name(std::string_view name) {
  if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..") {
    throw InvalidArgument(fmt::format("h5: object name '{}', expected a non-empty name without '/'", name));
  }
}

// A fixed-length, NUL-padded UTF-8 string type of size bytes (at least 1: HDF5 has no empty fixed strings).
Handle string_type(std::size_t size) {
  Handle type = own(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id(), std::max<std::size_t>(size, 1));
  H5Tset_strpad(type.id(), H5T_STR_NULLPAD);
  H5Tset_cset(type.id(), H5T_CSET_UTF8);
  return type;
}

// Where string values come from: an attribute or a dataset, read whole.
enum class Source { kAttribute, kDataset };

herr_t read_whole(Source source, hid_t id, hid_t mem_type, void* buffer) {
  return source == Source::kAttribute ? H5Aread(id, mem_type, buffer)
                                      : H5Dread(id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
}

std::string trim_fixed(const char* p, std::size_t size, H5T_str_t pad) {
  std::size_t n = 0;
  while (n < size && p[n] != '\0') {
    ++n;
  }
  if (pad == H5T_STR_SPACEPAD) {
    while (n > 0 && p[n - 1] == ' ') {
      --n;
    }
  }
  return {p, n};
}

// Reads all strings of an attribute or dataset, fixed-length or variable-length. The caller passes the
// object's file type and dataspace. Returns false (with HDF5's error stack intact) when a read fails.
bool read_string_values(Source source, hid_t id, hid_t type, hid_t space, std::vector<std::string>& out) {
  const hssize_t count = H5Sget_simple_extent_npoints(space);
  if (count < 0 || count > kMaxAttributeElements) {
    return false;
  }
  const auto n = static_cast<std::size_t>(count);
  out.clear();
  if (H5Tis_variable_str(type) > 0) {
    Handle mem = own(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.id(), H5T_VARIABLE);
    H5Tset_cset(mem.id(), H5Tget_cset(type));
    std::vector<char*> pointers(std::max<std::size_t>(n, 1), nullptr);
    if (read_whole(source, id, mem.id(), pointers.data()) < 0) {
      return false;
    }
    for (std::size_t i = 0; i < n; ++i) {
      out.emplace_back(pointers[i] != nullptr ? pointers[i] : "");
    }
    H5Dvlen_reclaim(mem.id(), space, H5P_DEFAULT, pointers.data());
    return true;
  }
  const std::size_t size = H5Tget_size(type);
  if (size == 0 || size > static_cast<std::size_t>(kMaxAttributeElements)) {
    return false;
  }
  Handle mem = own(H5Tcopy(type), H5Tclose);
  std::vector<char> buffer(std::max<std::size_t>(n, 1) * size);
  if (read_whole(source, id, mem.id(), buffer.data()) < 0) {
    return false;
  }
  const H5T_str_t pad = H5Tget_strpad(type);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(trim_fixed(buffer.data() + i * size, size, pad));
  }
  return true;
}

std::string describe_found(hid_t type) {
  const DType t = classify(type);
  if (t != DType::kOther) {
    return to_string(t);
  }
  switch (H5Tget_class(type)) {
    case H5T_COMPOUND: return "a compound type";
    case H5T_ENUM: return "an enum";
    case H5T_ARRAY: return "an array type";
    case H5T_VLEN: return "a variable-length sequence";
    case H5T_REFERENCE: return "a reference";
    case H5T_OPAQUE: return "an opaque type";
    case H5T_BITFIELD: return "a bitfield";
    default: return "an unknown type";
  }
}

std::string errno_message(int err) { return std::generic_category().message(err); }

}  // namespace

std::string to_string(DType type) {
  switch (type) {
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kUInt16: return "uint16";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kString: return "string";
    case DType::kOther: break;
  }
  return "another type";
}

std::string shape_to_string(std::span<const std::int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// ---- Handle ----

Handle::Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, -1);
    close_ = other.close_;
  }
  return *this;
}

void Handle::reset() noexcept {
  if (close() < 0) {
    H5Eclear2(H5E_DEFAULT);
  }
}

int Handle::close() noexcept {
  int status = 0;
  if (id_ >= 0 && close_ != nullptr) {
    status = close_(id_);
  }
  id_ = -1;
  return status;
}

// ---- Dataspace ----

Dataspace Dataspace::simple(std::span<const std::int64_t> shape) {
  silence();
  if (shape.empty()) {
    return Dataspace(own(H5Screate(H5S_SCALAR), H5Sclose));
  }
  std::vector<hsize_t> dims;
  for (const std::int64_t d : shape) {
    if (d < 0) {
      throw InvalidArgument(fmt::format("h5: shape {}, expected no negative dimension", shape_to_string(shape)));
    }
    dims.push_back(static_cast<hsize_t>(d));
  }
  const hid_t id = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  if (id < 0) {
    throw InvalidArgument(fmt::format("h5: cannot make a dataspace of shape {}: {}", shape_to_string(shape),
                                      hdf5_detail()));
  }
  return Dataspace(own(id, H5Sclose));
}

std::vector<std::int64_t> Dataspace::shape() const { return space_shape(id()); }

void Dataspace::select_rows(std::int64_t first, std::int64_t count) { rows(first, count, H5S_SELECT_SET); }

void Dataspace::add_rows(std::int64_t first, std::int64_t count) { rows(first, count, H5S_SELECT_OR); }

void Dataspace::rows(std::int64_t first, std::int64_t count, int op) {
  silence();
  const std::vector<std::int64_t> dims = shape();
  if (dims.empty() || first < 0 || count < 0 || first + count > dims[0]) {
    throw InvalidArgument(fmt::format("h5: rows [{}, {}) of a dataspace of shape {}, expected a range inside it",
                                      first, first + count, shape_to_string(dims)));
  }
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> extent(dims.begin(), dims.end());
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  if (H5Sselect_hyperslab(id(), static_cast<H5S_seloper_t>(op), start.data(), nullptr, extent.data(), nullptr) <
      0) {
    throw InvalidArgument(fmt::format("h5: cannot select rows [{}, {}): {}", first, first + count, hdf5_detail()));
  }
}

// ---- Object: attributes ----

std::string Object::child_path(std::string_view name) const {
  std::string out = path_;
  if (!out.ends_with('/')) {
    out += '/';
  }
  out += name;
  return out;
}

void Object::fail(std::string_view what) const { throw_error(file_, path_, what); }

bool Object::has_attribute(std::string_view name) const {
  silence();
  const htri_t exists = H5Aexists(id(), std::string(name).c_str());
  if (exists < 0) {
    fail(fmt::format("cannot look up attribute {}", name));
  }
  return exists > 0;
}

namespace {

// Replaces an attribute: HDF5 cannot change the type or shape of an existing one.
Handle create_attribute(const Object& object, std::string_view name, hid_t type, hid_t space) {
  const std::string key(name);
  if (object.has_attribute(name) && H5Adelete(object.id(), key.c_str()) < 0) {
    object.fail(fmt::format("cannot replace attribute {}", name));
  }
  Handle attr = own(H5Acreate2(object.id(), key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) {
    object.fail(fmt::format("cannot create attribute {}", name));
  }
  return attr;
}

struct OpenAttribute {
  Handle attr;
  Handle type;
  Handle space;
  std::int64_t count = 0;
};

OpenAttribute open_attribute(const Object& object, std::string_view name) {
  if (!object.has_attribute(name)) {
    object.fail(fmt::format("missing attribute {}", name));
  }
  OpenAttribute a;
  a.attr = own(H5Aopen(object.id(), std::string(name).c_str(), H5P_DEFAULT), H5Aclose);
  if (!a.attr.valid()) {
    object.fail(fmt::format("cannot open attribute {}", name));
  }
  a.type = own(H5Aget_type(a.attr.id()), H5Tclose);
  a.space = own(H5Aget_space(a.attr.id()), H5Sclose);
  if (!a.type.valid() || !a.space.valid()) {
    object.fail(fmt::format("cannot read attribute {}", name));
  }
  const hssize_t n = H5Sget_simple_extent_npoints(a.space.id());
  if (n < 0 || n > kMaxAttributeElements) {
    object.fail(fmt::format("attribute {}: {} elements, expected at most {}", name, n, kMaxAttributeElements));
  }
  a.count = n;
  return a;
}

void expect_single(const Object& object, std::string_view name, const OpenAttribute& a) {
  if (a.count != 1) {
    object.fail(fmt::format("attribute {}: {} values, expected 1", name, a.count));
  }
}

}  // namespace

void Object::set_string(std::string_view name, std::string_view value) const {
  silence();
  const Handle type = string_type(value.size());
  const Dataspace space = Dataspace::simple({});
  const Handle attr = create_attribute(*this, name, type.id(), space.id());
  std::string buffer(value);
  buffer.resize(std::max<std::size_t>(value.size(), 1), '\0');
  if (H5Awrite(attr.id(), type.id(), buffer.data()) < 0) {
    fail(fmt::format("cannot write attribute {}", name));
  }
}

void Object::set_int(std::string_view name, std::int64_t value) const {
  silence();
  const Dataspace space = Dataspace::simple({});
  const Handle attr = create_attribute(*this, name, H5T_STD_I64LE, space.id());
  if (H5Awrite(attr.id(), H5T_NATIVE_INT64, &value) < 0) {
    fail(fmt::format("cannot write attribute {}", name));
  }
}

void Object::set_double(std::string_view name, double value) const {
  silence();
  const Dataspace space = Dataspace::simple({});
  const Handle attr = create_attribute(*this, name, H5T_IEEE_F64LE, space.id());
  if (H5Awrite(attr.id(), H5T_NATIVE_DOUBLE, &value) < 0) {
    fail(fmt::format("cannot write attribute {}", name));
  }
}

void Object::set_floats(std::string_view name, std::span<const float> values) const {
  silence();
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  const Dataspace space = Dataspace::simple(std::span<const std::int64_t>(&n, 1));
  const Handle attr = create_attribute(*this, name, H5T_IEEE_F32LE, space.id());
  if (!values.empty() && H5Awrite(attr.id(), H5T_NATIVE_FLOAT, values.data()) < 0) {
    fail(fmt::format("cannot write attribute {}", name));
  }
}

void Object::set_strings(std::string_view name, std::span<const std::string> values) const {
  silence();
  std::size_t size = 1;
  for (const std::string& v : values) {
    size = std::max(size, v.size());
  }
  const Handle type = string_type(size);
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  const Dataspace space = Dataspace::simple(std::span<const std::int64_t>(&n, 1));
  const Handle attr = create_attribute(*this, name, type.id(), space.id());
  std::vector<char> buffer(values.size() * size, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::memcpy(buffer.data() + i * size, values[i].data(), values[i].size());
  }
  if (!values.empty() && H5Awrite(attr.id(), type.id(), buffer.data()) < 0) {
    fail(fmt::format("cannot write attribute {}", name));
  }
}

void Object::remove_attribute(std::string_view name) const {
  silence();
  if (H5Adelete(id(), std::string(name).c_str()) < 0) {
    fail(fmt::format("cannot remove attribute {}", name));
  }
}

std::string Object::get_string(std::string_view name) const {
  silence();
  const OpenAttribute a = open_attribute(*this, name);
  if (H5Tget_class(a.type.id()) != H5T_STRING) {
    fail(fmt::format("attribute {}: type expected a string, got {}", name, describe_found(a.type.id())));
  }
  expect_single(*this, name, a);
  std::vector<std::string> values;
  if (!read_string_values(Source::kAttribute, a.attr.id(), a.type.id(), a.space.id(), values)) {
    fail(fmt::format("cannot read attribute {}", name));
  }
  return values.at(0);
}

std::vector<std::string> Object::get_strings(std::string_view name) const {
  silence();
  const OpenAttribute a = open_attribute(*this, name);
  if (H5Tget_class(a.type.id()) != H5T_STRING) {
    fail(fmt::format("attribute {}: type expected strings, got {}", name, describe_found(a.type.id())));
  }
  std::vector<std::string> values;
  if (!read_string_values(Source::kAttribute, a.attr.id(), a.type.id(), a.space.id(), values)) {
    fail(fmt::format("cannot read attribute {}", name));
  }
  return values;
}

std::int64_t Object::get_int(std::string_view name) const {
  silence();
  const OpenAttribute a = open_attribute(*this, name);
  if (H5Tget_class(a.type.id()) != H5T_INTEGER) {
    fail(fmt::format("attribute {}: type expected an integer, got {}", name, describe_found(a.type.id())));
  }
  expect_single(*this, name, a);
  std::int64_t value = 0;
  if (H5Aread(a.attr.id(), H5T_NATIVE_INT64, &value) < 0) {
    fail(fmt::format("cannot read attribute {}", name));
  }
  return value;
}

double Object::get_double(std::string_view name) const {
  silence();
  const OpenAttribute a = open_attribute(*this, name);
  if (!is_numeric(classify(a.type.id()))) {
    fail(fmt::format("attribute {}: type expected a number, got {}", name, describe_found(a.type.id())));
  }
  expect_single(*this, name, a);
  double value = 0;
  if (H5Aread(a.attr.id(), H5T_NATIVE_DOUBLE, &value) < 0) {
    fail(fmt::format("cannot read attribute {}", name));
  }
  return value;
}

std::vector<float> Object::get_floats(std::string_view name) const {
  silence();
  const OpenAttribute a = open_attribute(*this, name);
  if (!is_numeric(classify(a.type.id()))) {
    fail(fmt::format("attribute {}: type expected numbers, got {}", name, describe_found(a.type.id())));
  }
  std::vector<float> values(static_cast<std::size_t>(a.count));
  if (!values.empty() && H5Aread(a.attr.id(), H5T_NATIVE_FLOAT, values.data()) < 0) {
    fail(fmt::format("cannot read attribute {}", name));
  }
  return values;
}

// ---- Dataset ----

std::vector<std::int64_t> Dataset::shape() const {
  silence();
  const Handle space = own(H5Dget_space(id()), H5Sclose);
  if (!space.valid()) {
    fail("cannot read the shape");
  }
  return space_shape(space.id());
}

DType Dataset::dtype() const {
  silence();
  const Handle type = own(H5Dget_type(id()), H5Tclose);
  if (!type.valid()) {
    fail("cannot read the type");
  }
  return classify(type.id());
}

std::int64_t Dataset::storage_bytes() const {
  silence();
  return static_cast<std::int64_t>(H5Dget_storage_size(id()));
}

int Dataset::filter_count() const {
  silence();
  const Handle plist = own(H5Dget_create_plist(id()), H5Pclose);
  if (!plist.valid()) {
    fail("cannot read the storage properties");
  }
  const int n = H5Pget_nfilters(plist.id());
  if (n < 0) {
    fail("cannot read the filters");
  }
  return n;
}

std::vector<std::int64_t> Dataset::chunk() const {
  silence();
  const Handle plist = own(H5Dget_create_plist(id()), H5Pclose);
  if (!plist.valid()) {
    fail("cannot read the storage properties");
  }
  if (H5Pget_layout(plist.id()) != H5D_CHUNKED) {
    return {};
  }
  std::vector<hsize_t> dims(H5S_MAX_RANK);
  const int rank = H5Pget_chunk(plist.id(), H5S_MAX_RANK, dims.data());
  if (rank < 0) {
    fail("cannot read the chunk shape");
  }
  return {dims.begin(), dims.begin() + rank};
}

template <class T>
void Dataset::write(std::span<const T> values) const {
  silence();
  const std::vector<std::int64_t> dims = shape();
  if (static_cast<std::int64_t>(values.size()) != product(dims)) {
    throw InvalidArgument(fmt::format("{}: {}: writing {} values, expected {} for shape {}", file_, path_,
                                      values.size(), product(dims), shape_to_string(dims)));
  }
  if (!values.empty() && H5Dwrite(id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    fail("cannot write");
  }
}

template <class T>
void Dataset::read(std::span<T> values) const {
  silence();
  const std::vector<std::int64_t> dims = shape();
  if (static_cast<std::int64_t>(values.size()) != product(dims)) {
    throw InvalidArgument(fmt::format("{}: {}: reading into {} values, expected {} for shape {}", file_, path_,
                                      values.size(), product(dims), shape_to_string(dims)));
  }
  if (!values.empty() && H5Dread(id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    fail("cannot read");
  }
}

namespace {

// The file and memory selections of rows [first, first + count) of a dataset, or an InvalidArgument when
// the range or the buffer size does not fit.
struct RowSelection {
  Dataspace file;
  Dataspace memory;
};

RowSelection select_rows(const Dataset& d, std::int64_t first, std::int64_t count, std::size_t buffer_size) {
  Handle space = own(H5Dget_space(d.id()), H5Sclose);
  if (!space.valid()) {
    d.fail("cannot read the shape");
  }
  Dataspace file(std::move(space));
  std::vector<std::int64_t> dims = file.shape();
  if (dims.empty() || first < 0 || count < 0 || first + count > dims[0]) {
    throw InvalidArgument(fmt::format("{}: {}: rows [{}, {}), expected a range inside [0, {})", d.file(),
                                      d.path(), first, first + count, dims.empty() ? 0 : dims[0]));
  }
  dims[0] = count;
  if (static_cast<std::int64_t>(buffer_size) != product(dims)) {
    throw InvalidArgument(fmt::format("{}: {}: {} rows need {} values, got a buffer of {}", d.file(), d.path(),
                                      count, product(dims), buffer_size));
  }
  file.select_rows(first, count);
  return {std::move(file), Dataspace::simple(dims)};
}

}  // namespace

template <class T>
void Dataset::write_rows(std::int64_t first, std::int64_t count, std::span<const T> values) const {
  silence();
  const RowSelection s = select_rows(*this, first, count, values.size());
  if (count > 0 && H5Dwrite(id(), native_type<T>(), s.memory.id(), s.file.id(), H5P_DEFAULT, values.data()) < 0) {
    fail(fmt::format("cannot write rows [{}, {})", first, first + count));
  }
}

template <class T>
void Dataset::read_rows(std::int64_t first, std::int64_t count, std::span<T> values) const {
  silence();
  const RowSelection s = select_rows(*this, first, count, values.size());
  if (count > 0 && H5Dread(id(), native_type<T>(), s.memory.id(), s.file.id(), H5P_DEFAULT, values.data()) < 0) {
    fail(fmt::format("cannot read rows [{}, {})", first, first + count));
  }
}

std::vector<std::string> Dataset::read_strings() const {
  silence();
  const Handle type = own(H5Dget_type(id()), H5Tclose);
  const Handle space = own(H5Dget_space(id()), H5Sclose);
  if (!type.valid() || !space.valid()) {
    fail("cannot read the type");
  }
  if (H5Tget_class(type.id()) != H5T_STRING) {
    fail(fmt::format("type expected strings, got {}", describe_found(type.id())));
  }
  std::vector<std::string> values;
  if (!read_string_values(Source::kDataset, id(), type.id(), space.id(), values)) {
    fail("cannot read");
  }
  return values;
}

// The element types the header promises.
template void Dataset::write<float>(std::span<const float>) const;
template void Dataset::read<float>(std::span<float>) const;
template void Dataset::write_rows<float>(std::int64_t, std::int64_t, std::span<const float>) const;
template void Dataset::read_rows<float>(std::int64_t, std::int64_t, std::span<float>) const;
template void Dataset::write<double>(std::span<const double>) const;
template void Dataset::read<double>(std::span<double>) const;
template void Dataset::write_rows<double>(std::int64_t, std::int64_t, std::span<const double>) const;
template void Dataset::read_rows<double>(std::int64_t, std::int64_t, std::span<double>) const;
template void Dataset::write<std::uint8_t>(std::span<const std::uint8_t>) const;
template void Dataset::read<std::uint8_t>(std::span<std::uint8_t>) const;
template void Dataset::write_rows<std::uint8_t>(std::int64_t, std::int64_t, std::span<const std::uint8_t>) const;
template void Dataset::read_rows<std::uint8_t>(std::int64_t, std::int64_t, std::span<std::uint8_t>) const;
template void Dataset::write<std::int32_t>(std::span<const std::int32_t>) const;
template void Dataset::read<std::int32_t>(std::span<std::int32_t>) const;
template void Dataset::write_rows<std::int32_t>(std::int64_t, std::int64_t, std::span<const std::int32_t>) const;
template void Dataset::read_rows<std::int32_t>(std::int64_t, std::int64_t, std::span<std::int32_t>) const;
template void Dataset::write<std::int64_t>(std::span<const std::int64_t>) const;
template void Dataset::read<std::int64_t>(std::span<std::int64_t>) const;
template void Dataset::write_rows<std::int64_t>(std::int64_t, std::int64_t, std::span<const std::int64_t>) const;
template void Dataset::read_rows<std::int64_t>(std::int64_t, std::int64_t, std::span<std::int64_t>) const;

// ---- Group ----

namespace {

// Tracks and indexes creation order, and leaves out modification times so that the same content gives the
// same bytes.
Handle group_creation_list() {
  Handle plist = own(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  H5Pset_link_creation_order(plist.id(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  H5Pset_obj_track_times(plist.id(), 0);
  return plist;
}

H5I_type_t member_type(const Group& g, std::string_view name) {
  if (!g.contains(name)) {
    return H5I_BADID;
  }
  const Handle object = own(H5Oopen(g.id(), std::string(name).c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) {
    g.fail(fmt::format("cannot open {}", name));
  }
  return H5Iget_type(object.id());
}

}  // namespace

bool Group::contains(std::string_view name) const {
  silence();
  check_name(name);
  const htri_t exists = H5Lexists(id(), std::string(name).c_str(), H5P_DEFAULT);
  if (exists < 0) {
    fail(fmt::format("cannot look up {}", child_path(name)));
  }
  return exists > 0;
}

bool Group::contains_group(std::string_view name) const { return member_type(*this, name) == H5I_GROUP; }

bool Group::contains_dataset(std::string_view name) const { return member_type(*this, name) == H5I_DATASET; }

Group Group::create_group(std::string_view name) const {
  silence();
  check_name(name);
  const Handle plist = group_creation_list();
  Handle g = own(H5Gcreate2(id(), std::string(name).c_str(), H5P_DEFAULT, plist.id(), H5P_DEFAULT), H5Gclose);
  if (!g.valid()) {
    fail(fmt::format("cannot create group {}", child_path(name)));
  }
  return Group(std::move(g), file_, child_path(name));
}

Group Group::open_group(std::string_view name) const {
  silence();
  const H5I_type_t type = member_type(*this, name);
  if (type == H5I_BADID) {
    fail(fmt::format("missing group {}", child_path(name)));
  }
  if (type != H5I_GROUP) {
    fail(fmt::format("{}: expected a group, got a {}", child_path(name), type == H5I_DATASET ? "dataset" : "link"));
  }
  Handle g = own(H5Gopen2(id(), std::string(name).c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.valid()) {
    fail(fmt::format("cannot open group {}", child_path(name)));
  }
  return Group(std::move(g), file_, child_path(name));
}

std::vector<std::string> Group::members() const {
  silence();
  H5G_info_t info{};
  if (H5Gget_info(id(), &info) < 0) {
    fail("cannot list members");
  }
  H5_index_t index = H5_INDEX_NAME;
  // The identifier of a File is the file's, not its root group's, and only a group has a creation list.
  const Handle self = own(H5Gopen2(id(), ".", H5P_DEFAULT), H5Gclose);
  const Handle plist = own(self.valid() ? H5Gget_create_plist(self.id()) : -1, H5Pclose);
  unsigned order = 0;
  if (plist.valid() && H5Pget_link_creation_order(plist.id(), &order) >= 0 &&
      (order & H5P_CRT_ORDER_INDEXED) != 0) {
    index = H5_INDEX_CRT_ORDER;
  }
  H5Eclear2(H5E_DEFAULT);
  std::vector<std::string> names;
  names.reserve(info.nlinks);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(id(), ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) {
      fail("cannot list members");
    }
    std::string name(static_cast<std::size_t>(size) + 1, '\0');
    if (H5Lget_name_by_idx(id(), ".", index, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0) {
      fail("cannot list members");
    }
    name.resize(static_cast<std::size_t>(size));
    names.push_back(std::move(name));
  }
  return names;
}

Dataset Group::create_dataset(std::string_view name, DType type, std::span<const std::int64_t> shape,
                              const DatasetLayout& layout) const {
  silence();
  check_name(name);
  const hid_t stored = file_type(type);
  const Dataspace space = Dataspace::simple(shape);
  const Handle plist = own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(plist.id(), 0);
  if (!layout.chunk.empty()) {
    if (layout.chunk.size() != shape.size()) {
      throw InvalidArgument(fmt::format("{}: {}: chunk {} for shape {}, expected one extent per dimension",
                                        file_, child_path(name), shape_to_string(layout.chunk),
                                        shape_to_string(shape)));
    }
    std::vector<hsize_t> chunk;
    for (const std::int64_t c : layout.chunk) {
      chunk.push_back(static_cast<hsize_t>(std::max<std::int64_t>(c, 1)));
    }
    if (H5Pset_chunk(plist.id(), static_cast<int>(chunk.size()), chunk.data()) < 0) {
      fail(fmt::format("cannot chunk {} by {}", child_path(name), shape_to_string(layout.chunk)));
    }
    // Compression first and the checksum last on write: reading then verifies the stored bytes before
    // they reach the decompressor.
    if (layout.deflate_level > 0 && H5Pset_deflate(plist.id(), static_cast<unsigned>(layout.deflate_level)) < 0) {
      fail(fmt::format("cannot compress {}", child_path(name)));
    }
    if (layout.checksum == ChunkChecksum::kFletcher32 && H5Pset_fletcher32(plist.id()) < 0) {
      fail(fmt::format("cannot checksum {}", child_path(name)));
    }
  } else if (layout.deflate_level > 0 || layout.checksum != ChunkChecksum::kNone) {
    throw InvalidArgument(fmt::format("{}: {}: compression and chunk checksums need a chunk shape", file_,
                                      child_path(name)));
  }
  Handle d = own(H5Dcreate2(id(), std::string(name).c_str(), stored, space.id(), H5P_DEFAULT, plist.id(),
                            H5P_DEFAULT),
                 H5Dclose);
  if (!d.valid()) {
    fail(fmt::format("cannot create dataset {}", child_path(name)));
  }
  return Dataset(std::move(d), file_, child_path(name));
}

Dataset Group::open_dataset(std::string_view name, const ChunkCache& cache) const {
  silence();
  const H5I_type_t type = member_type(*this, name);
  if (type == H5I_BADID) {
    fail(fmt::format("missing dataset {}", child_path(name)));
  }
  if (type != H5I_DATASET) {
    fail(fmt::format("{}: expected a dataset, got a {}", child_path(name), type == H5I_GROUP ? "group" : "link"));
  }
  const Handle access = own(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  if (cache.bytes > 0 || cache.slots > 0) {
    // w0 = 1: chunks read in full are evicted first, which suits reads that sweep a dataset in order.
    H5Pset_chunk_cache(access.id(),
                       cache.slots > 0 ? static_cast<size_t>(cache.slots) : H5D_CHUNK_CACHE_NSLOTS_DEFAULT,
                       cache.bytes > 0 ? static_cast<size_t>(cache.bytes) : H5D_CHUNK_CACHE_NBYTES_DEFAULT, 1.0);
  }
  Handle d = own(H5Dopen2(id(), std::string(name).c_str(), access.id()), H5Dclose);
  if (!d.valid()) {
    fail(fmt::format("cannot open dataset {}", child_path(name)));
  }
  return Dataset(std::move(d), file_, child_path(name));
}

Dataset Group::create_strings(std::string_view name, std::span<const std::string> values) const {
  silence();
  check_name(name);
  std::size_t size = 1;
  for (const std::string& v : values) {
    size = std::max(size, v.size());
  }
  const Handle type = string_type(size);
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  const Dataspace space = Dataspace::simple(std::span<const std::int64_t>(&n, 1));
  const Handle plist = own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(plist.id(), 0);
  Handle d = own(H5Dcreate2(id(), std::string(name).c_str(), type.id(), space.id(), H5P_DEFAULT, plist.id(),
                            H5P_DEFAULT),
                 H5Dclose);
  if (!d.valid()) {
    fail(fmt::format("cannot create dataset {}", child_path(name)));
  }
  std::vector<char> buffer(values.size() * size, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::memcpy(buffer.data() + i * size, values[i].data(), values[i].size());
  }
  if (!values.empty() && H5Dwrite(d.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()) < 0) {
    fail(fmt::format("cannot write dataset {}", child_path(name)));
  }
  return Dataset(std::move(d), file_, child_path(name));
}

void Group::remove(std::string_view name) const {
  silence();
  check_name(name);
  if (H5Ldelete(id(), std::string(name).c_str(), H5P_DEFAULT) < 0) {
    fail(fmt::format("cannot remove {}", child_path(name)));
  }
}

// ---- File ----

namespace {

// Closing the file closes whatever is still open in it, so an exception that unwinds past open objects
// cannot leave the file half-open; locking is kept but tolerated where the file system lacks it.
Handle file_access_list() {
  Handle plist = own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(plist.id(), H5F_CLOSE_STRONG);
  H5Pset_file_locking(plist.id(), 1, 1);
  return plist;
}

}  // namespace

File File::create(const std::filesystem::path& file) {
  silence();
  const std::string name = file.string();
  Handle access = file_access_list();
  if (H5Pset_libver_bounds(access.id(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0) {
    throw_error(name, "", "cannot select the file format");
  }
  const Handle creation = own(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_link_creation_order(creation.id(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Handle f = own(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, creation.id(), access.id()), H5Fclose);
  if (!f.valid()) {
    throw_error(name, "", "cannot create");
  }
  return File(std::move(f), name, "/");
}

File File::open(const std::filesystem::path& file, FileMode mode) {
  silence();
  const std::string name = file.string();
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (!std::filesystem::exists(status)) {
    throw DataError(fmt::format("{}: cannot open, no such file", name));
  }
  if (std::filesystem::is_directory(status)) {
    throw DataError(fmt::format("{}: cannot open, expected a regular file, got a directory", name));
  }
  const auto size = std::filesystem::file_size(file, ec);
  if (!ec && size == 0) {
    throw DataError(fmt::format("{}: not an HDF5 file, expected the HDF5 signature, got an empty file", name));
  }
  const htri_t is_hdf5 = H5Fis_hdf5(name.c_str());
  if (is_hdf5 == 0) {
    throw DataError(fmt::format("{}: not an HDF5 file, expected the HDF5 signature, got none", name));
  }
  H5Eclear2(H5E_DEFAULT);
  const Handle access = file_access_list();
  const unsigned flags = mode == FileMode::kReadWrite ? H5F_ACC_RDWR : H5F_ACC_RDONLY;
  Handle f = own(H5Fopen(name.c_str(), flags, access.id()), H5Fclose);
  if (!f.valid()) {
    throw_error(name, "", "cannot open");
  }
  return File(std::move(f), name, "/");
}

void File::close() {
  silence();
  if (handle_.valid() && handle_.close() < 0) {
    throw_error(file_, "", "cannot close (the data may not all be written)");
  }
}

// ---- crash-safe writing ----

std::filesystem::path temporary_path(const std::filesystem::path& file) {
  std::filesystem::path tmp = file;
  tmp += fmt::format(".{}.tmp", ::getpid());
  return tmp;
}

void sync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError(fmt::format("{}: cannot open for fsync: {}", path.string(), errno_message(errno)));
  }
  const int status = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on a directory; the rename is then as durable as they make it.
  if (status != 0 && err != EINVAL && err != EROFS) {
    throw DataError(fmt::format("{}: cannot fsync: {}", path.string(), errno_message(err)));
  }
}

namespace {

// A file built in HDF5's core driver without a backing store, whose buffer these callbacks keep when the file
// closes (where the driver would free it): the bytes of the closed file, superblock finished, without any file I/O
// by HDF5. (H5Fget_file_image on an open file of the newest format gives a superblock whose checksum fails.) HDF5
// first opens an existing file of that name tentatively, reading it into a buffer of its own, which it frees with
// the same operation before the new file is built: the buffer kept is the last one freed on closing.
struct MemoryImage {
  std::map<void*, std::size_t> sizes;  // the driver's live buffers
  void* bytes = nullptr;
  std::size_t capacity = 0;
  ~MemoryImage() { std::free(bytes); }
};

void* image_malloc(std::size_t size, H5FD_file_image_op_t, void* udata) {
  void* p = std::malloc(size);
  if (p != nullptr) static_cast<MemoryImage*>(udata)->sizes[p] = size;
  return p;
}
void* image_memcpy(void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void*) {
  return std::memcpy(dest, src, size);
}
void* image_realloc(void* ptr, std::size_t size, H5FD_file_image_op_t, void* udata) {
  auto* image = static_cast<MemoryImage*>(udata);
  const auto it = image->sizes.find(ptr);
  const std::size_t old_size = it == image->sizes.end() ? 0 : it->second;
  if (it != image->sizes.end()) image->sizes.erase(it);
  void* p = std::realloc(ptr, size);
  if (p != nullptr) {
    image->sizes[p] = size;
  } else if (ptr != nullptr) {
    image->sizes[ptr] = old_size;  // still the driver's
  }
  return p;
}
herr_t image_free(void* ptr, H5FD_file_image_op_t op, void* udata) {
  auto* image = static_cast<MemoryImage*>(udata);
  const auto it = image->sizes.find(ptr);
  const std::size_t size = it == image->sizes.end() ? 0 : it->second;
  if (it != image->sizes.end()) image->sizes.erase(it);
  if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr != nullptr) {
    std::free(image->bytes);
    image->bytes = ptr;
    image->capacity = size;
  } else {
    std::free(ptr);
  }
  return 0;
}
void* udata_copy(void* udata) { return udata; }
herr_t udata_free(void*) { return 0; }

// A new file in memory (in the newest format, like File::create) that `image` receives when it closes.
Handle create_in_memory(const std::string& name, MemoryImage& image) {
  Handle access = file_access_list();
  H5FD_file_image_callbacks_t callbacks{image_malloc, image_memcpy, image_realloc, image_free,
                                        udata_copy,   udata_free,   &image};
  if (H5Pset_fapl_core(access.id(), std::size_t{1} << 20, 0) < 0 ||
      H5Pset_file_image_callbacks(access.id(), &callbacks) < 0 ||
      H5Pset_libver_bounds(access.id(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0) {
    throw_error(name, "", "cannot set up a file in memory");
  }
  const Handle creation = own(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_link_creation_order(creation.id(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Handle f = own(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, creation.id(), access.id()), H5Fclose);
  if (!f.valid()) throw_error(name, "", "cannot create in memory");
  return f;
}

// The file's length, as its superblock (version 2 or 3: the newest format) records it: its end-of-file address.
std::size_t image_length(const std::string& name, const MemoryImage& image) {
  const auto* b = static_cast<const unsigned char*>(image.bytes);
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (b == nullptr || image.capacity < 48 || std::memcmp(b, kSignature, 8) != 0 || (b[8] != 2 && b[8] != 3) ||
      b[9] != 8) {
    throw DataError(fmt::format("{}: the file built in memory has no superblock of version 2 or 3 with 8-byte "
                                "addresses, expected one (HDF5 {}.{})",
                                name, H5_VERS_MAJOR, H5_VERS_MINOR));
  }
  std::uint64_t eof = 0;
  for (int i = 7; i >= 0; --i) eof = eof << 8 | b[28 + i];
  if (eof > image.capacity) {
    throw DataError(fmt::format("{}: the file built in memory ends at {}, past its {} bytes", name, eof,
                                image.capacity));
  }
  return static_cast<std::size_t>(eof);
}

}  // namespace

void write_atomically(const std::filesystem::path& file, const std::function<void(File&)>& write, Staging staging) {
  const std::filesystem::path tmp = temporary_path(file);
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  try {
    if (staging == Staging::kInMemory) {
      silence();
      MemoryImage image;
      File f(create_in_memory(file.string(), image), file.string(), "/");
      write(f);
      f.close();
      write_new_file(tmp, image.bytes, image_length(file.string(), image));
    } else {
      File f = File::create(tmp);
      write(f);
      f.close();
      sync_path(tmp);
    }
    std::filesystem::rename(tmp, file, ec);
    if (ec) {
      throw DataError(fmt::format("{}: cannot replace it with {}: {}", file.string(), tmp.string(), ec.message()));
    }
    const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
    sync_path(dir);
  } catch (const DataError& e) {
    std::filesystem::remove(tmp, ec);
    // Named by the file it was to become (the temporary one is gone), with what failed in it.
    std::string what = e.what();
    if (what.starts_with(tmp.string() + ": ")) what.erase(0, tmp.string().size() + 2);
    throw DataError(fmt::format("{}: cannot be written: {}", file.string(), what));
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

}  // namespace dtnn::io::h5

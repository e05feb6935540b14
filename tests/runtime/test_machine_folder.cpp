// SPDX-License-Identifier: Apache-2.0
// Machine archives (runtime/machine.hpp): a calibration in one file, extracted into a private folder for the life
// of a MachineFolder and packed back; hostile archives refused with the archive's name before anything leaves it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "runtime/machine.hpp"
#include "support/tar_writer.hpp"
#include "support/throws_with.hpp"

namespace dtnn {
namespace {

namespace fs = std::filesystem;
using runtime::MachineFolder;
using test::TarMember;
using test_support::throws_with;

const fs::path kZen5 = fs::path(DTNN_SOURCE_DIR) / "tests" / "data" / "machine-zen5.tar.xz";
// A GPU calibration (an H200 with 16 Xeon cores) committed with the simulation study.
const fs::path kH200 = fs::path(DTNN_SOURCE_DIR) / "bench" / "results" / "machines" / "h200_xeon16.tar.xz";

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("dtnn-machine-test-" + std::to_string(::getpid()) + "-" + name);
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// Every file of a folder and its bytes, by its path in the folder.
std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().lexically_relative(dir).generic_string()] = read_bytes(e.path());
  }
  return files;
}

// The private folders of extracted archives that exist now.
std::size_t extracted_folders() {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    if (e.path().filename().string().rfind("dtnn-machine-", 0) == 0 &&
        e.path().filename().string().rfind("dtnn-machine-test-", 0) != 0) {
      ++n;
    }
  }
  return n;
}

TEST(MachineFolderTest, AnArchiveIsExtractedForTheLifeOfTheObject) {
  const std::size_t before = extracted_folders();
  fs::path dir;
  {
    const MachineFolder m = MachineFolder::open(kZen5);
    dir = m.dir();
    EXPECT_TRUE(m.archived());
    EXPECT_EQ(m.path(), kZen5);
    EXPECT_NE(dir, kZen5);
    EXPECT_TRUE(fs::exists(dir / "machine.json"));
    EXPECT_TRUE(fs::exists(dir / "starpu" / ".starpu" / "sampling" / "bus" / "dtnn-machine.platform.v4.xml"));
    EXPECT_TRUE(
        fs::exists(dir / "starpu" / ".starpu" / "sampling" / "codelets" / "45" / "conv2d_fwd_convgemm.dtnn-machine"));
    EXPECT_EQ(runtime::machine_cpus(dir), 2);
    EXPECT_EQ(runtime::read_machine_file(dir).at("calibrations")[0].at("model"), "simplecnn");
    EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all) << "a private folder";
  }
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(extracted_folders(), before);
}

TEST(MachineFolderTest, AFolderIsUsedInPlace) {
  const MachineFolder archive = MachineFolder::open(kZen5);
  const MachineFolder folder = MachineFolder::open(archive.dir());
  EXPECT_FALSE(folder.archived());
  EXPECT_EQ(folder.dir(), archive.dir());
  folder.save();  // nothing to pack
  EXPECT_TRUE(fs::exists(archive.dir() / "machine.json"));
}

// Packing is reproducible (sorted members, no owner or time): the same folder gives the same bytes, and what is
// extracted again is the folder, file for file.
TEST(MachineFolderTest, PackingRoundTripsAndIsReproducible) {
  const MachineFolder m = MachineFolder::open(kZen5);
  for (const char* suffix : {".tar.xz", ".tar.gz", ".tar"}) {
    const fs::path first = temp_path(std::string("first") + suffix);
    const fs::path second = temp_path(std::string("second") + suffix);
    runtime::pack_machine_archive(m.dir(), first);
    runtime::pack_machine_archive(m.dir(), second);
    EXPECT_EQ(read_bytes(first), read_bytes(second)) << suffix;
    const MachineFolder again = MachineFolder::open(first);
    EXPECT_EQ(files_of(again.dir()), files_of(m.dir())) << suffix;
    fs::remove(first);
    fs::remove(second);
  }
  EXPECT_LT(fs::file_size(kZen5), 8000u) << "a compressed calibration (the folder: ~49 KB in 21 files)";
}

// create: an archive begins empty, is packed by save(), and a second create finds what the first saved (the models
// of several calibrations accumulate in it, as in a folder). Nothing is written to the archive without save().
TEST(MachineFolderTest, CreateExtractsAndSavePacksBack) {
  const fs::path archive = temp_path("create.tar.xz");
  fs::remove(archive);
  {
    const MachineFolder m = MachineFolder::create(archive);
    EXPECT_TRUE(m.archived());
    EXPECT_TRUE(fs::is_directory(m.dir()));
    EXPECT_TRUE(fs::is_empty(m.dir()));
    runtime::write_machine_file(m.dir(), {{"calibrations", {{{"model", "first"}}}}});
    m.save();
  }
  {
    const MachineFolder m = MachineFolder::create(archive);
    nlohmann::json doc = runtime::read_machine_file(m.dir());
    ASSERT_EQ(doc.at("calibrations").size(), 1u);
    doc["calibrations"].push_back({{"model", "second"}});
    runtime::write_machine_file(m.dir(), doc);
  }  // not saved: the archive keeps one calibration
  {
    const MachineFolder m = MachineFolder::create(archive);
    EXPECT_EQ(runtime::read_machine_file(m.dir()).at("calibrations").size(), 1u);
  }
  for (const auto& e : fs::directory_iterator(archive.parent_path())) {
    EXPECT_EQ(e.path().string().rfind(archive.string() + ".", 0), std::string::npos)
        << "a temporary file left beside the archive: " << e.path();
  }
  fs::remove(archive);

  const fs::path folder = temp_path("create-folder");
  const MachineFolder f = MachineFolder::create(folder);
  EXPECT_FALSE(f.archived());
  EXPECT_EQ(f.dir(), folder);
  EXPECT_TRUE(runtime::is_machine_archive_name("a/b.tar.xz"));
  EXPECT_TRUE(runtime::is_machine_archive_name("b.tgz"));
  EXPECT_FALSE(runtime::is_machine_archive_name("machines/zen5"));
  EXPECT_FALSE(runtime::is_machine_archive_name("b.zip"));
  const fs::path file = temp_path("plain-file");
  write_bytes(file, "x");
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)MachineFolder::create(file); },
                                           {"--out", file.string(), "is a file"}));
  fs::remove(file);
}

// The archive `members` written to a file of this test; DataError from MachineFolder::open naming it and `parts`,
// and no extracted folder left behind.
::testing::AssertionResult refused(const std::string& name, const std::vector<TarMember>& members,
                                   std::initializer_list<std::string> parts) {
  const fs::path archive = temp_path(name + ".tar");
  write_bytes(archive, test::tar_archive(members));
  const std::size_t before = extracted_folders();
  std::vector<std::string> all = {archive.string()};
  all.insert(all.end(), parts.begin(), parts.end());
  ::testing::AssertionResult r = ::testing::AssertionSuccess();
  try {
    (void)MachineFolder::open(archive);
    r = ::testing::AssertionFailure() << name << ": accepted";
  } catch (const DataError& e) {
    for (const std::string& part : all) {
      if (std::string(e.what()).find(part) == std::string::npos) {
        r = ::testing::AssertionFailure() << name << ": \"" << e.what() << "\" lacks \"" << part << "\"";
      }
    }
  } catch (const std::exception& e) {
    r = ::testing::AssertionFailure() << name << ": threw another exception: " << e.what();
  }
  if (extracted_folders() != before) r = ::testing::AssertionFailure() << name << ": an extracted folder was left";
  fs::remove(archive);
  return r;
}

const TarMember kJson{"machine.json", '0', "{}\n"};

TEST(MachineFolderTest, HostileMembersAreRefusedNamingTheArchive) {
  EXPECT_TRUE(refused("absolute", {kJson, {"/tmp/dtnn-evil", '0', "x"}}, {"'/tmp/dtnn-evil' is an absolute path"}));
  EXPECT_TRUE(refused("dotdot", {{"starpu/../../dtnn-evil", '0', "x"}}, {"'starpu/../../dtnn-evil'", "'..'"}));
  EXPECT_TRUE(refused("dotdot-dir", {{"../", '5'}}, {"'../'", "'..'"}));
  EXPECT_TRUE(refused("symlink", {{"machine.json", '2', "", "/etc/passwd"}},
                      {"'machine.json' is a symbolic link (to '/etc/passwd')"}));
  EXPECT_TRUE(refused("hardlink", {kJson, {"starpu/.starpu/sampling/bus/x", '1', "", "machine.json"}},
                      {"'starpu/.starpu/sampling/bus/x' is a hard link"}));
  EXPECT_TRUE(refused("chardev", {{"starpu/.starpu/sampling/bus/tty", '3'}}, {"is a character device"}));
  EXPECT_TRUE(refused("blockdev", {{"starpu/.starpu/sampling/bus/sda", '4'}}, {"is a block device"}));
  EXPECT_TRUE(refused("fifo", {{"machine.json", '6'}}, {"'machine.json' is a fifo"}));
  // Outside the layout: a file beside machine.json, in StarPU's home, in a model version's subfolder, in debug.
  for (const std::string name : {"notes.txt", "starpu/.bashrc", "starpu/.starpu/sampling/codelets/45/a/b",
                                 "starpu/.starpu/sampling/codelets/v45/x", "starpu/.starpu/sampling/debug/x.debug",
                                 "starpu/.starpu/sampling/bus"}) {
    EXPECT_TRUE(refused("layout", {kJson, {name, '0', "x"}}, {"'" + name + "'", "is not part of a machine folder"}));
  }
  EXPECT_TRUE(refused("twice", {kJson, kJson}, {"'machine.json'", "appears twice"}));
  // A header announcing 2 GiB: refused before anything is read or allocated.
  EXPECT_TRUE(refused("huge", {{"starpu/.starpu/sampling/bus/big", '0', "", "", std::int64_t{2} << 30}},
                      {"'starpu/.starpu/sampling/bus/big' is 2147483648 bytes, expected at most 67108864"}));
}

TEST(MachineFolderTest, DamagedOrForeignFilesAreRefusedNamingThem) {
  const std::size_t before = extracted_folders();
  const fs::path text = temp_path("not-an-archive.tar.xz");
  const auto foreign = [&] {
    return throws_with<DataError>([&] { (void)MachineFolder::open(text); }, {text.string(), "not a machine archive"});
  };
  write_bytes(text, "this is not an archive\n");
  EXPECT_TRUE(foreign());
  write_bytes(text, "");
  EXPECT_TRUE(foreign());
  fs::remove(text);
  // The committed archive cut short: the compressed stream ends before the members do.
  const std::string whole = read_bytes(kZen5);
  const fs::path cut = temp_path("cut.tar.xz");
  write_bytes(cut, whole.substr(0, whole.size() / 2));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)MachineFolder::open(cut); }, {cut.string(), "damaged or truncated"}));
  // A plain tar cut inside a member's data.
  const std::string tar = test::tar_archive({{"machine.json", '0', std::string(3000, ' ')}});
  write_bytes(cut, tar.substr(0, 1500));
  EXPECT_TRUE(throws_with<DataError>([&] { (void)MachineFolder::open(cut); }, {cut.string(), "'machine.json'"}));
  fs::remove(cut);
  EXPECT_EQ(extracted_folders(), before);
  // A well-formed archive without a calibration, and what is not there at all.
  const fs::path empty = temp_path("empty.tar");
  write_bytes(empty, test::tar_archive({kJson}));
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)MachineFolder::open(empty); },
                                           {"--machine: archive '" + empty.string() + "' holds no calibration"}));
  fs::remove(empty);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { (void)MachineFolder::open("/nonexistent-machine.tar.xz"); },
                                           {"'/nonexistent-machine.tar.xz' is not a folder"}));
}

// Packing writes only what a machine folder holds: a link in it (which would be followed) is refused, naming it,
// and the archive is left as it was.
TEST(MachineFolderTest, PackingRefusesWhatIsNotACalibration) {
  const MachineFolder m = MachineFolder::open(kZen5);
  const fs::path archive = temp_path("pack.tar.xz");
  runtime::pack_machine_archive(m.dir(), archive);
  const std::string packed = read_bytes(archive);
  const fs::path link = m.dir() / "starpu" / ".starpu" / "sampling" / "bus" / "passwd";
  fs::create_symlink("/etc/passwd", link);
  EXPECT_TRUE(throws_with<DataError>([&] { runtime::pack_machine_archive(m.dir(), archive); },
                                     {archive.string(), link.string(), "is a symbolic link"}));
  fs::remove(link);
  const fs::path stray = m.dir() / "notes.txt";
  write_bytes(stray, "x");
  EXPECT_TRUE(throws_with<DataError>([&] { runtime::pack_machine_archive(m.dir(), archive); },
                                     {stray.string(), "not part of a machine folder"}));
  fs::remove(stray);
  // StarPU's debug folder (STARPU_MODEL_DEBUG builds) is left out.
  fs::create_directories(m.dir() / "starpu" / ".starpu" / "sampling" / "debug");
  write_bytes(m.dir() / "starpu" / ".starpu" / "sampling" / "debug" / "x.debug", "x");
  runtime::pack_machine_archive(m.dir(), archive);
  EXPECT_EQ(read_bytes(archive), packed);
  EXPECT_TRUE(throws_with<InvalidArgument>([&] { runtime::pack_machine_archive(m.dir(), temp_path("x.zip")); },
                                           {"x.zip", "not an archive name"}));
  fs::remove(archive);
}

fs::path bus_file(const fs::path& dir, const std::string& suffix) {
  return dir / "starpu" / ".starpu" / "sampling" / "bus" / ("dtnn-machine" + suffix);
}

// Found by fuzz_machine_folder: a history entry whose sum is not a number made std::stod throw
// std::invalid_argument ("stod", naming nothing) out of derive_machine_folder; a platform link's bandwidth of
// 1e999 did the same with std::out_of_range. Both are now a DataError naming the file and where in it.
TEST(MachineFolderTest, DerivingRefusesAValueThatIsNoNumberNamingTheFile) {
  runtime::TargetMachine faster;
  faster.cpu_speed = 2.0;
  const MachineFolder cpu = MachineFolder::open(kZen5);
  const fs::path model = cpu.dir() / "starpu" / ".starpu" / "sampling" / "codelets" / "45" / "dense_fwd.dtnn-machine";
  write_bytes(model,
              "# Model for cpu0_impl0 (Comb0)\n"
              "# number of entries\n"
              "1\n"
              "382ef4d2\t2023936        \t2.569011e+07   \t5.302010e+02   \t5.748260e+01   )2.173824e+04   \t"
              "1.166111e+07   \t41\n");
  const fs::path out = temp_path("derived");
  EXPECT_TRUE(throws_with<DataError>([&] { runtime::derive_machine_folder(cpu.dir(), out, faster); },
                                     {model.string(), "line 4: sum ')2.173824e+04', expected a number"}));

  runtime::TargetMachine two_gpus;
  two_gpus.gpus = 2;
  const MachineFolder gpu = MachineFolder::open(kH200);
  const fs::path platform = bus_file(gpu.dir(), ".platform.v4.xml");
  std::string xml = read_bytes(platform);
  const std::string bandwidth = R"(<link id="RAM-CUDA0" bandwidth=")";
  const std::size_t at = xml.find(bandwidth);
  ASSERT_NE(at, std::string::npos);
  xml.replace(at + bandwidth.size(), xml.find('B', at + bandwidth.size()) - at - bandwidth.size(), "1e999");
  write_bytes(platform, xml);
  EXPECT_TRUE(throws_with<DataError>(
      [&] { runtime::derive_machine_folder(gpu.dir(), out, two_gpus); },
      {platform.string(), "link RAM-CUDA0: bandwidth '1e999', expected a number within a double's range"}));
  fs::remove_all(out);
}

// A machine.json whose fields dtnn reads back have other types made nlohmann::json's type_error escape from dtnn
// simulate and calibrate ('[json.exception.type_error.306] cannot use value() with number', naming no file), as the
// machine-folder harness showed once it read the document as they do. read_machine_file now refuses it, naming the
// file and the field.
TEST(MachineFolderTest, AMachineDescriptionOfOtherTypesIsRefusedNamingTheFieldAndTheFile) {
  const fs::path dir = temp_path("json");
  fs::create_directories(dir);
  const fs::path file = dir / "machine.json";
  const std::pair<const char*, const char*> bad[] = {
      {R"([1, 2])", "the document: expected an object, got array"},
      {R"({"cpu": 7})", "cpu: expected a string, got number"},
      {R"({"calibrations": 5})", "calibrations: expected an array, got number"},
      {R"({"calibrations": [{"model": "simplecnn"}, "x"]})", "calibrations[1]: expected an object, got string"},
      {R"({"calibrations": [{"batch_size": "64"}]})", "calibrations[0].batch_size: expected an integer, got string"},
      {R"({"calibrations": [{"tiles": 2.5}]})", "calibrations[0].tiles: expected an integer, got number"},
      {R"({"calibrations": [{"device": null}]})", "calibrations[0].device: expected a string, got null"},
      {R"({"calibrations": [{"cpu_task_overhead_us": "12"}]})",
       "calibrations[0].cpu_task_overhead_us: expected a number, got string"},
  };
  for (const auto& [text, message] : bad) {
    write_bytes(file, text);
    EXPECT_TRUE(throws_with<DataError>([&] { (void)runtime::read_machine_file(dir); }, {file.string() + ": " + message}))
        << text;
  }
  write_bytes(file, R"({"cpu": "AMD EPYC", "calibrations": [{"model": "simplecnn", "batch_size": 64, "tiles": 2,
                        "cpu_task_overhead_us": 12, "step_ms": 16.9, "notes": [1, "x"]}]})");
  EXPECT_EQ(runtime::read_machine_file(dir).at("calibrations")[0].at("tiles"), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dtnn

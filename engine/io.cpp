#include "engine/io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include "engine/error.h"

namespace ag {

namespace {

// A new file `stem`.XXXXXX, opened for writing: mkstemp creates it exclusively (O_EXCL), so never
// through a symlink or over a file someone placed there. Returns its descriptor; sets `path`. An
// error names `file`, the file the temporary is for, and its folder (never the temporary's name).
int create_unique_file(const std::string& stem, const std::string& file, std::string& path) {
  std::string name = stem + ".XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string folder = std::filesystem::path(file).parent_path().string();
    AG_CHECK(error != ENOENT, "{}: cannot write it: the folder {} does not exist", file, folder.empty() ? "." : folder);
    fail("{}: cannot write it in the folder {}: {}", file, folder.empty() ? "." : folder, std::strerror(error));
  }
  const mode_t umask = ::umask(0);  // read it: open(…, 0644) would apply it; mkstemp's 0600 would hide the file
  ::umask(umask);
  ::fchmod(fd, 0644 & ~umask);
  path = name;
  return fd;
}

// Writes all of `bytes` to `fd`; 0, or the errno of the write that failed.
int write_all(int fd, std::string_view bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? EIO : errno;
    written += static_cast<size_t>(n);
  }
  return 0;
}

// What writing to a path means (Note [output paths]).
struct OutputTarget {
  std::string file;     // the regular file (or new name) to replace atomically, a symlink's target resolved
  bool stream = false;  // write into `file` as it is (a character device, a FIFO), or into `stream_fd`
  int stream_fd = -1;   // with `stream`: this process's standard output or error, already open
};

// The standard stream (1 or 2) that is the file `status` describes, or -1.
int standard_stream_of(const struct stat& status) {
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat open_file {};
    if (::fstat(fd, &open_file) == 0 && open_file.st_dev == status.st_dev && open_file.st_ino == status.st_ino)
      return fd;
  }
  return -1;
}

// Note [output paths]: `-` is standard output; a new name or a regular file is replaced atomically;
// a symlink is followed and its final target replaced atomically (the link stays); a character
// device or a FIFO (/dev/null, /dev/stdout, a pipe) is streamed into, never replaced; so is a path
// that is this process's standard output or error (/dev/stdout redirected to a file). A symlink to
// a file that does not exist yet makes it (as a shell's `>` does). A folder, a block device, a
// socket, a symlink loop and a symlink into a missing folder are refused.
// The file a chain of symlinks ends at (which may not exist yet: then its folder must).
std::string final_target(const std::string& link) {
  std::filesystem::path path = link;
  std::error_code error;
  for (int hops = 0; std::filesystem::is_symlink(std::filesystem::symlink_status(path, error)); ++hops) {
    AG_CHECK(hops < 40, "{}: cannot follow the symlink: too many levels of symbolic links", link);
    const std::filesystem::path target = std::filesystem::read_symlink(path, error);
    AG_CHECK(!error, "{}: cannot follow the symlink: {}", link, error.message());
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  const std::filesystem::path folder = path.parent_path().empty() ? "." : path.parent_path();
  AG_CHECK(std::filesystem::is_directory(folder, error), "{}: is a symlink to {}, whose folder does not exist", link,
           path.string());
  return path.string();
}

OutputTarget output_target(const std::string& path) {
  AG_CHECK(!path.empty(), "cannot write a file with an empty name");
  if (path == "-") return {.file = "standard output", .stream = true, .stream_fd = STDOUT_FILENO};
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    AG_CHECK(errno == ENOENT, "{}: cannot write there: {}", path, std::strerror(errno));
    return {.file = path};  // a new file (a missing folder is reported when the temporary is made)
  }
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) {
    AG_CHECK(errno == ENOENT, "{}: cannot follow the symlink: {}", path, std::strerror(errno));
    return {.file = final_target(path)};  // a symlink to a new file: made where it points
  }
  AG_CHECK(!S_ISDIR(target.st_mode), "{}: is a folder, expected a file name to write", path);
  if (S_ISCHR(target.st_mode) || S_ISFIFO(target.st_mode))
    return {.file = path, .stream = true, .stream_fd = standard_stream_of(target)};
  AG_CHECK(S_ISREG(target.st_mode),
           "{}: is a {}, not a regular file, a character device or a FIFO; attograd writes only to those", path,
           S_ISBLK(target.st_mode) ? "block device" : "socket or other special file");
  if (const int fd = standard_stream_of(target); fd >= 0) return {.file = path, .stream = true, .stream_fd = fd};
  return {.file = S_ISLNK(link.st_mode) ? final_target(path) : path};
}

// Writes `bytes` into a character device, a FIFO or a standard stream, which is opened (never
// created) and left in place. A FIFO no process reads is refused, not waited for.
void stream_into(const OutputTarget& target, const std::string& path, std::string_view bytes) {
  int fd = target.stream_fd;
  if (fd == STDOUT_FILENO) std::fflush(stdout);
  if (fd < 0) {
    fd = ::open(target.file.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    AG_CHECK(fd >= 0 || errno != ENXIO, "{}: is a FIFO that no process reads; start its reader first", path);
    AG_CHECK(fd >= 0, "{}: cannot open for writing: {}", path, std::strerror(errno));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  const int error = write_all(fd, bytes);
  const bool closed = fd == target.stream_fd || ::close(fd) == 0;
  AG_CHECK(error == 0, "{}: could not be written: write failed: {}", path, std::strerror(error));
  AG_CHECK(closed, "{}: could not be written: close failed: {}", path, std::strerror(errno));
}

// Note [inputs are not outputs] (io.h): a file is known by its device and inode, which every path to
// it shares (a hard link, a symlink followed, `..`).
struct FileId {
  dev_t device;
  ino_t inode;
  bool operator==(const FileId&) const = default;
};

// The regular file `path` is, after following symlinks; nothing for a new name, a device or a FIFO.
std::optional<FileId> regular_file_id(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0 || !S_ISREG(status.st_mode)) return std::nullopt;
  return FileId{status.st_dev, status.st_ino};
}

// The inputs noted (each with the path it was read by) and the file this process last wrote at each
// path (by path: a run replaces its checkpoints every epoch, each time a new inode).
struct ProcessFiles {
  std::mutex mutex;
  std::vector<std::pair<std::string, FileId>> inputs;
  std::map<std::string, FileId> written;
};

ProcessFiles& process_files() {
  static ProcessFiles files;
  return files;
}

}  // namespace

void note_input(const std::string& path) {
  const std::optional<FileId> id = regular_file_id(path);
  if (!id) return;
  ProcessFiles& files = process_files();
  const std::lock_guard<std::mutex> lock(files.mutex);
  const auto written_here = [&](const auto& file) { return file.second == *id && regular_file_id(file.first) == id; };
  if (std::none_of(files.written.begin(), files.written.end(), written_here)) files.inputs.emplace_back(path, *id);
}

void check_not_an_input(const std::string& output) {
  const std::optional<FileId> id = regular_file_id(output);
  if (!id) return;
  ProcessFiles& files = process_files();
  const std::lock_guard<std::mutex> lock(files.mutex);
  for (const auto& [input, input_id] : files.inputs)
    AG_CHECK(input_id != *id || regular_file_id(input) != id,
             "{}: is the same file as {}, an input of this command, which writing would destroy; choose another "
             "file",
             output, input);
}

void forget_input(const std::string& path) {
  const std::optional<FileId> id = regular_file_id(path);
  ProcessFiles& files = process_files();
  const std::lock_guard<std::mutex> lock(files.mutex);
  std::erase_if(files.inputs, [&](const auto& input) { return input.second == id; });
}

std::string run_program(const std::vector<std::string>& command, std::string_view input) {
  AG_CHECK(!command.empty(), "run_program: no program given");
  struct MemoryFile {  // an in-memory file (memfd), closed when it goes
    int fd;
    explicit MemoryFile(const std::string& program) : fd(::memfd_create(program.c_str(), MFD_CLOEXEC)) {
      AG_CHECK(fd >= 0, "{}: cannot make an in-memory file for it: {}", program, std::strerror(errno));
    }
    ~MemoryFile() { ::close(fd); }
  };
  const MemoryFile in(command[0]), out(command[0]);
  const int written = write_all(in.fd, input);
  AG_CHECK(written == 0 && ::lseek(in.fd, 0, SEEK_SET) == 0, "{}: cannot hand it its input: {}", command[0],
           std::strerror(written ? written : errno));
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, in.fd, STDIN_FILENO);  // the copies lose FD_CLOEXEC
  ::posix_spawn_file_actions_adddup2(&actions, out.fd, STDOUT_FILENO);
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  AG_CHECK(spawned == 0, "{}: cannot run it: {}", command[0], std::strerror(spawned));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  AG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "{}: failed ({})", command[0],
           WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                             : fmt::format("ended by signal {}", WTERMSIG(status)));
  struct stat size {};
  AG_CHECK(::fstat(out.fd, &size) == 0 && ::lseek(out.fd, 0, SEEK_SET) == 0, "{}: cannot read its output: {}",
           command[0], std::strerror(errno));
  std::string output(static_cast<size_t>(size.st_size), '\0');
  for (size_t got = 0; got < output.size();) {
    const ssize_t n = ::read(out.fd, output.data() + got, output.size() - got);
    AG_CHECK(n > 0 || (n < 0 && errno == EINTR), "{}: cannot read its output: {}", command[0],
             n == 0 ? "it ended early" : std::strerror(errno));
    got += static_cast<size_t>(std::max<ssize_t>(n, 0));
  }
  return output;
}

void write_file_atomically(const std::string& requested, const std::string& bytes, Durability durability) {
  check_not_an_input(requested);
  const OutputTarget target = output_target(requested);
  if (target.stream) return stream_into(target, requested, bytes);
  const std::string& path = target.file;
  std::string temporary;
  const int fd = create_unique_file(path + ".tmp", requested, temporary);
  const auto fail_removing_temporary = [&](const char* what, int error) {
    ::unlink(temporary.c_str());
    fail("{}: could not be written: {} failed: {}", requested, what, std::strerror(error));
  };
  if (const int error = write_all(fd, bytes); error != 0) {
    ::close(fd);
    fail_removing_temporary("write", error);
  }
  if (durability == Durability::synced && ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail_removing_temporary("fsync", error);
  }
  if (::close(fd) != 0) fail_removing_temporary("close", errno);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail_removing_temporary("rename", errno);
  if (const std::optional<FileId> id = regular_file_id(path)) {
    ProcessFiles& files = process_files();
    const std::lock_guard<std::mutex> lock(files.mutex);
    files.written[path] = *id;
  }
  if (durability == Durability::synced) sync_to_disk({path});  // the rename: the folder's entry
}

void create_output_folder(const std::string& dir) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(dir, error);
  AG_CHECK(!std::filesystem::exists(status) || std::filesystem::is_directory(status),
           "{}: exists and is not a folder (expected a folder for the run's files)", dir);
  std::filesystem::create_directories(dir, error);
  AG_CHECK(!error, "{}: cannot create the folder: {}", dir, error.message());
}

bool sync_to_disk(const std::vector<std::string>& paths) {
  auto sync = [](const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), O_RDONLY | flags);
    if (fd < 0) return errno == ENOENT;  // nothing to keep
    const bool synced = ::fsync(fd) == 0;
    return ::close(fd) == 0 && synced;
  };
  bool all = true;
  for (const std::string& path : paths) {
    const std::string folder = std::filesystem::path(path).parent_path().string();
    all = sync(path, 0) && sync(folder.empty() ? "." : folder, O_DIRECTORY) && all;
  }
  return all;
}

}  // namespace ag

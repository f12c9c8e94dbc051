// Writing files: the one writer of every file attograd makes (checkpoints, CSV, JSON, SVG, HTML),
// atomically, never over one of the command's inputs; the run folder; another program run on bytes
// in memory; fsync of what was written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ag {

// The one writer of every file attograd makes (Note [output paths] in io.cpp). What `path`
// is decides what happens:
// - a new name or a regular file: replaced by `bytes` atomically: written to a new temporary file
//   beside it (created exclusively, so a symlink planted there is never followed), then renamed over
//   it, so a reader, or a crash of this process at any instant, sees the old file or the new one,
//   never a part (a crash may leave a `path.tmp.XXXXXX`: nothing reads it);
// - a symlink: followed; its final target is replaced atomically as above, the link stays;
// - a character device, a FIFO, `-` (standard output), or the file this process's standard output
//   or error is (`/dev/stdout` redirected to a file): streamed into, never replaced; a FIFO that no
//   process reads is refused rather than waited for;
// - a folder, a block device, a socket, a symlink loop or into a missing folder: refused, untouched;
// - one of this process's inputs (note_input), by any path: refused, untouched.
// Durability::synced (the default) also fsyncs a replaced file and its folder before returning;
// Durability::deferred does not (a training run writes checkpoints every epoch, and an fsync costs
// milliseconds: it calls sync_to_disk once at the end).
enum class Durability { synced, deferred };
void write_file_atomically(const std::string& path, const std::string& bytes,
                           Durability durability = Durability::synced);

// Note [inputs are not outputs]: no command writes over a file it reads. Every reader of a file a
// command takes in (data: tasks::read_data_file; checkpoints and models: load_safetensors) calls
// note_input, so a new reader cannot forget it, and write_file_atomically, the one writer, refuses an
// output that is the same file as a noted input (the same device and inode after following symlinks:
// a hard link, a symlink or a `..` path is the same file), naming both. An input is a file from
// outside: one this process wrote itself (a run reading back its best.safetensors) is not noted.
void note_input(const std::string& path);
// Refuses `output` if it is one of the noted inputs (as they are now: an input since deleted or
// replaced is not). write_file_atomically calls it; a command calls it early to refuse before long
// work, as the run folder does for its files when it is claimed.
void check_not_an_input(const std::string& output);
// Takes `path` off the inputs: a run continuing in its own folder replaces the checkpoint it read.
void forget_input(const std::string& path);

// Runs `command` (the program looked up on the PATH, then its arguments) with `input` on its standard
// input and returns what it wrote to its standard output (its standard error is this process's).
// Both go through in-memory files (memfd), never the file system: a process killed meanwhile, even
// by SIGKILL, leaves no file behind (graph's `dot -Tsvg`). Throws naming the program when it cannot
// be run or does not exit with status 0.
std::string run_program(const std::vector<std::string>& command, std::string_view input);

// Creates the folder `dir` (and its parents) for a run's files, or accepts it if it exists;
// throws naming `dir` when it is not a folder or cannot be created.
void create_output_folder(const std::string& dir);

// fsyncs each existing file of `paths` and the folders holding them, so a power cut cannot lose
// them. False if one could not be synced (it does not throw: it also runs while an error unwinds).
bool sync_to_disk(const std::vector<std::string>& paths);

}  // namespace ag

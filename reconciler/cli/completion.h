// Shell completion for the mesh-reconciler CLI, generated from the command table (main.cc:
// each command's flags and operands) and the flag table (DescribeFlags: what each value is), so
// it never offers a command or flag the binary lacks, and each command offers its own flags.
//
//   source <(mesh-reconciler completion bash)
//   mesh-reconciler completion zsh > "${fpath[1]}/_mesh-reconciler"
//   mesh-reconciler completion fish | source
#pragma once

#include <string>
#include <vector>

#include "reconciler/cli/commands.h"

namespace mesh::reconciler {

// A bash script defining _mesh_reconciler and binding it to mesh-reconciler: commands in the
// first position (and after "help"); after a command, its own flags; after a flag, its words
// (--users-scope, --log-level, -o...), a file name (--records...), a directory (--store-dir) or
// nothing (a URL, a duration); a file name as the records operand of the commands that take one.
std::string BashCompletion(const std::vector<Command>& commands);
// The same for zsh (_arguments per command, with descriptions): a #compdef file for $fpath
// (Debian: /usr/share/zsh/vendor-completions/_mesh-reconciler), or sourced.
std::string ZshCompletion(const std::vector<Command>& commands);
// The same for fish (complete -c lines), for /usr/share/fish/vendor_completions.d/.
std::string FishCompletion(const std::vector<Command>& commands);

}  // namespace mesh::reconciler

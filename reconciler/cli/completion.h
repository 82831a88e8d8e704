// Shell completion for the mesh-reconciler CLI, generated from the command table (main.cc) and
// the flag table (DescribeFlags), so it never offers a command or flag the binary lacks.
//
//   source <(mesh-reconciler completion bash)
#pragma once

#include <string>
#include <vector>

#include "reconciler/cli/settings.h"

namespace mesh::reconciler {

// A bash completion script defining _mesh_reconciler and binding it to mesh-reconciler:
// commands in the first position (and after "help"), flags after, file names after a flag that
// takes a value, and the words of --log-level / --log-format.
std::string BashCompletion(const std::vector<std::string>& commands,
                           const std::vector<FlagDescription>& flags);

}  // namespace mesh::reconciler

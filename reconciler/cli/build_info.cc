#include "reconciler/cli/build_info.h"

namespace mesh::reconciler {

const char* BuildCommit() {
  return MESH_RECONCILER_COMMIT;
}

}  // namespace mesh::reconciler

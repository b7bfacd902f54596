// The MPI backend of a build without MPI (CMake did not find it): the callers compile the
// same, and asking for MPI says how to get it.
#include <cstdlib>

#include "dpt/parallel/mpi_communicator.h"

#include "dpt/core/config_error.h"

namespace dpt::parallel {

bool mpi_built_in() { return false; }

MpiRuntime::MpiRuntime() {
  throw ConfigError("dist",
                    "`dist` mpi: this dptrain was built without MPI; install libopenmpi-dev and openmpi-bin "
                    "(scripts/install-deps.sh) and rebuild");
}

MpiRuntime::~MpiRuntime() = default;

std::shared_ptr<Communicator> MpiRuntime::communicator(const std::string&, double) const { return nullptr; }

void MpiRuntime::abort_job(int exit_code) { std::_Exit(exit_code); }

}  // namespace dpt::parallel

"""``mpiexec -n R python -m synth.exec.mpi SCHEDULE [options of synth run]``: one rank.

The entry point only: nothing imports this module, so no module is loaded twice. Started by
``synth run`` (``--progress-file``), the rank first gets its keeper (`synth.exec.mpi.keeper`),
before anything starts MPI.
"""

import sys

from synth.exec.mpi.keeper import board_path, keep

path = board_path(sys.argv[1:])
if path is not None:
    keep(path)

from synth.exec.mpi.ranks import main  # noqa: E402  (after the fork: MPI starts on this import)

main()

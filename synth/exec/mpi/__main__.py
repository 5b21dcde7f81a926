"""``mpiexec -n R python -m synth.exec.mpi SCHEDULE [options of synth run]``: one rank.

The entry point only: nothing imports this module, so no module is loaded twice.
"""

from synth.exec.mpi.ranks import main

main()

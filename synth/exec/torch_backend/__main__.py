"""``python -m synth.exec.torch_backend SCHEDULE [options]``: one rank of a torch.distributed run."""

from synth.exec.torch_backend.ranks import main

main()

"""synth: topology-aware collective-communication algorithm synthesizer."""

__version__ = "0.1.0"

"""Synthesizers, one per module.

Each module builds schedules for the collectives it serves (``synthesize(topology, collective,
router=None, **options) -> Schedule``, raising `synth.errors.NotApplicable` with the reason when it
cannot serve a case) and exports its description as ``METHOD`` (a `synth.method.Method`: its name,
written once as the module's ``NAME``, summary, family, collectives, default chunks, options).
`synth.method.Method.synthesize` runs one and verifies the result; the table of all of them, by
name, is `synth.registry`, above this package. The engines the methods share are in
`synth.algorithms.engines`.
"""

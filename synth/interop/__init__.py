"""Interoperability with other tools' formats.

- `synth.interop.msccl_xml`: the MSCCL algorithm XML (data model, reader, writer) and the buffer
  layout of each collective in it.
- `synth.interop.msccl_import`: an MSCCL algorithm → a verified `synth` schedule.
- `synth.interop.msccl_export`: a `synth` schedule → an MSCCL algorithm the runtime can load.
- `synth.interop.equivalence`: whether two schedules move the same data the same way.
- `synth.interop.nccl_topology`: an NCCL topology dump (``NCCL_TOPO_DUMP_FILE``) → a topology.

See ``docs/interop.md``.
"""

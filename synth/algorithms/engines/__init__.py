"""The engines and building blocks that the methods of `synth.algorithms` are made of.

- `builders`: the dispatcher from a collective to a method's builder; reductions by duality,
  allreduce as reduce-scatter + allgather.
- `size_tuning`: options of self-tuning methods; time candidates at a size, keep the fastest.
- `lowering`: logical rank-to-rank steps onto the real links (relaying where needed).
- `composition`: schedules side by side, one after another with per-chunk overlap, embedded from a
  sub-topology.
- `ring_channels`: NCCL-like ring channels over the machine's links (multiring, trees, hierarchical).
- `rail_routes`: a network path per transfer, parallel transfers spread over parallel paths
  (scale-out ports, spines), and the lowering of steps that name them (pipelined-tree).
- `path_channels`: rank-to-rank paths through switches with their links (greedy, packing).
- `greedy_engine`: the step-synchronous link–chunk matching engine behind `greedy`.
- `tree_packing`: spanning trees at the optimal allgather/broadcast throughput; `tree_pipeline`:
  those trees turned into pipelined steps (behind `packing`).
- `slice_ramp`: unequal (ramped) slice sizes for a pipeline whose stages run at different speeds,
  from an LP over the step model (`packing`, `pipelined-tree`).
"""

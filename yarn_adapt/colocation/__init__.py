"""The co-location guard (TopoSch §4.2.2 with Koordinator's safety margins): per node,
how much of it batch work may see, from the node's risk (``tracing``) and the
latency-critical applications' demand; acted out on the RM's node totals (or a batch
queue's maximum capacity) and served to the node agents as reclaim requests.

- ``model``    frozen inputs, memory and the plan (one decision per node, with reasons)
- ``decide``   the visibility decision (pure)
- ``demand``   where the demand bound comes from (learners, or usage plus headroom)
- ``observe``  the edges read: RM nodes, the trace store's risk and QoS
- ``originals``the journal of each node's original total, written before any change
- ``follow``   which journal entries the nodes the RM lists make obsolete (pure)
- ``actuate``  acting on the RM (node totals, or a queue cap) and putting it all back
- ``guard``    one round (observe -> decide -> act -> record) and the guard's state
"""

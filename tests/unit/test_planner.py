"""Memory planning by lifetime: pure Python, no device."""
from customlayers.runtime.compile.planner import TensorLife, plan_memory


def test_disjoint_lifetimes_share_a_buffer():
    plan = plan_memory([TensorLife("a", 1000, 0, 1), TensorLife("b", 1000, 1, 2),
                        TensorLife("c", 1000, 2, 3)], alignment=1)
    # a dies at step 1 (read by the step that writes b): a and c can share, b cannot
    assert plan.slot_of["a"] == plan.slot_of["c"]
    assert plan.slot_of["a"] != plan.slot_of["b"]
    assert plan.planned_bytes == 2000
    assert plan.total_tensor_bytes == 3000


def test_overlapping_lifetimes_never_share():
    lives = [TensorLife(i, 100 * (i + 1), i, i + 3) for i in range(6)]
    plan = plan_memory(lives, alignment=1)
    for x in lives:
        for y in lives:
            if x.key != y.key and not (x.last < y.first or y.last < x.first):
                assert plan.slot_of[x.key] != plan.slot_of[y.key]
    for t in lives:
        assert plan.slot_sizes[plan.slot_of[t.key]] >= t.nbytes


def test_chain_needs_two_buffers():
    # a long chain a0 -> a1 -> ... : ping-pong between two buffers
    lives = [TensorLife(i, 4096, i, i + 1) for i in range(50)]
    plan = plan_memory(lives)
    assert len(plan.slot_sizes) == 2
    assert "planned device memory" in plan.summary()

"""Generate large, valid .gsr programs for benchmarks (and tests): n graph nodes in layers."""

from __future__ import annotations


def generate_program(n_nodes: int, fan_in: int = 4) -> str:
    """A program with about `n_nodes` nodes: a quarter criteria, the rest reducers and gates in layers."""
    n_criteria = max(2, n_nodes // 4)
    lines = ['rubric generated "A generated program for benchmarks"', "",
             "task pointwise { scale = 1..5  quantize = round }", ""]
    for i in range(n_criteria):
        if i % 3 == 0:
            lines.append(f'criterion c{i}: Ordinal[1..5] {{ ask "How good is aspect {i}?" level 1 "bad" level 5 "good" }}')
        elif i % 3 == 1:
            lines.append(f'criterion c{i}: Bool = rule.word_count(above: {100 + i})')
        else:
            lines.append(f'criterion c{i}: Score = human(field: "scores.s{i}")')
    layer = []
    for i in range(n_criteria):
        layer.append(f"normalize(c{i})" if i % 3 in (0, 1) else f"c{i}")
    made = n_criteria + sum(1 for i in range(n_criteria) if i % 3 in (0, 1))
    k = 0
    while len(layer) > 1 or made < n_nodes:
        nxt = []
        for j in range(0, len(layer), fan_in):
            group = layer[j:j + fan_in]
            name = f"n{k}"
            k += 1
            weights = ", ".join(str(0.1 + 0.05 * (g % 5)) for g in range(len(group)))
            lines.append(f"node {name} = weighted_mean(items: [{', '.join(group)}], weights: [{weights}])")
            made += 1
            if k % 5 == 0:
                trig = f"c{(k * 3 + 1) % n_criteria if ((k * 3 + 1) % n_criteria) % 3 == 1 else 1}"
                lines.append(f"node g{k} = cap(base: {name}, trigger: {trig}, at: 0.8)")
                made += 1
                name = f"g{k}"
            nxt.append(name)
        layer = nxt
        if len(layer) == 1 and made >= n_nodes:
            break
        if len(layer) == 1:
            layer = layer * 2
    lines += ["", f"sink {layer[0]}", ""]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    import sys

    if len(sys.argv) > 2 or not all(a.isdigit() and int(a) > 0 for a in sys.argv[1:]):
        sys.exit("usage: generate.py [NODES] (a whole number above 0)")
    print(generate_program(int(sys.argv[1]) if len(sys.argv) > 1 else 100))

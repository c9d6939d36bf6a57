"""dtrain-project --plot: images/s per GPU and scaling efficiency against GPUs (log scale), as
bench/plot_bench.py draws its plots (Debian's python3-matplotlib, no display)."""
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def draw(path, rows, title):
    gpus = [s.layout.gpus for s, _ in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    top.plot(gpus, [s.per_gpu for s, _ in rows], "o-", label="projected images/s per GPU")
    top.set_ylabel("images/s per GPU")
    top.set_ylim(0, 1.15 * max(s.per_gpu for s, _ in rows))
    top.grid(True, alpha=0.3)
    top.set_title(textwrap.fill(f"dtrain-project: {title}", 70), fontsize=9)
    for s, _ in rows:
        top.annotate(f"b{s.layout.batch:g}", (s.layout.gpus, s.per_gpu), fontsize=7, textcoords="offset points",
                     xytext=(0, 5), ha="center")
    bottom.plot(gpus, [100 * e for _, e in rows], "s-", color="tab:orange", label="efficiency (same batch per GPU)")
    bottom.plot(gpus, [100 * s.exposed / s.seconds for s, _ in rows], "^-", color="tab:red",
                label="exposed communication (% of step)")
    bottom.set_ylabel("percent")
    bottom.set_xlabel("GPUs")
    bottom.set_xscale("log", base=2)
    bottom.set_xticks(gpus)
    bottom.set_xticklabels([str(g) for g in gpus], fontsize=7, rotation=45)
    bottom.minorticks_off()
    bottom.set_ylim(0, 105)
    bottom.grid(True, alpha=0.3)
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

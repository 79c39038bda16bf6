"""The HTML's first view reads like the pipeline, measured from the DOM of real runs at 1280x800.

Three scripts of the shapes users bring (`scripts/`), each traced for real with
`flowmap trace`: a single-file GRPO trainer of 12 stages, an actor-critic
loop, and a driver that hands one batch to 14 stages; and the demo's trainer.
On each first view, in headless Chromium: every owner whole inside the graph's
panel, no two boxes or labels overlapping, no text under 11 CSS px, every drawn
edge's figure equal to its table row (and every hidden label counted in the
legend), the driver one node with no line drawn to it, stages top-down in the
flow's order, and the weight sync drawn back up, dashed, closing the loop.

Public scripts nobody here wrote (tests/integration/public_scripts/, each with its SOURCE.md:
open-thought/tiny-grpo joined into one file, pytorch/examples' reinforce.py and
actor_critic.py) are traced with `flowmap trace` alone, two of them stopped by Ctrl-C to their
process group mid-run: stages in the script's order (rollout, advantages, log-probs, loss),
the learning stage reached from the policy, the steps the optimizer's updates.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from browser.chromium import find_chromium

import flowmap
from flowmap.reporters.html import write_html

pytestmark = pytest.mark.slow

if find_chromium() is None:
    pytest.skip("no Chromium on PATH (install `chromium`, or set FLOWMAP_CHROMIUM)", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PUBLIC = os.path.join(ROOT, "tests", "integration", "public_scripts")  # each with SOURCE.md
SCRIPTS = {
    "grpo": (os.path.join(HERE, "scripts", "grpo_single_file.py"), ["6"]),
    "actor_critic": (os.path.join(HERE, "scripts", "actor_critic.py"), ["5"]),
    "driver_star": (os.path.join(HERE, "scripts", "driver_star.py"), ["4"]),
    "demo": (os.path.join(ROOT, "examples", "grpo_tiny.py"), ["--steps", "4", "--seed", "0", "--no-progress"]),
    # the demo as one run drew it, with no resubmits: its seams replayed, the same every time
    "demo_seams": (os.path.join(HERE, "scripts", "demo_seams.py"), []),
    # the public shapes as a user brings them: no flowmap.seam, no map; trace finds the seams
    "grpo_auto": (os.path.join(ROOT, "examples", "grpo_single_file.py"), ["--steps", "6"]),
    "actor_critic_auto": (os.path.join(ROOT, "examples", "actor_critic.py"), ["--episodes", "6"]),
    # the same shapes in other styles: GRPO as a trainer class, A2C with a replay list
    "grpo_class_auto": (os.path.join(HERE, "scripts", "grpo_trainer_class.py"), ["--steps", "6"]),
    "a2c_replay_auto": (os.path.join(HERE, "scripts", "a2c_replay.py"), ["--episodes", "6"]),
    # a top-level loop fed by a DataLoader's two worker processes
    "grpo_loader_auto": (os.path.join(HERE, "scripts", "grpo_dataloader.py"), ["--steps", "5"]),
    # public scripts nobody here wrote, adapted only to run offline (their SOURCE.md says how):
    # open-thought/tiny-grpo joined into one file (a tiny random Llama, two updates per batch),
    # and pytorch/examples' reinforce.py
    "tiny_grpo_auto": (os.path.join(PUBLIC, "tiny_grpo_openthought", "train.py"), ["--steps", "3"]),
    "reinforce_auto": (os.path.join(PUBLIC, "pytorch_reinforce", "reinforce.py"), ["--episodes", "6"]),
    "actor_critic_upstream_auto": (os.path.join(PUBLIC, "pytorch_actor_critic", "actor_critic.py"),
                                   ["--episodes", "6"]),
    # the same, run with no end and stopped by Ctrl-C to its process group after 8 episodes
    "actor_critic_ctrl_c_auto": (os.path.join(PUBLIC, "pytorch_actor_critic", "actor_critic.py"),
                                 ["--episodes", "0", "--log-interval", "1"]),
    "tiny_grpo_ctrl_c_auto": (os.path.join(PUBLIC, "tiny_grpo_openthought", "train.py"), ["--steps", "0"]),
}
NEEDS_TRANSFORMERS = {"tiny_grpo_auto", "tiny_grpo_ctrl_c_auto"}
#: Scripts stopped as a user stops them: SIGINT to the process group once they printed this
#: many lines with the marker, one per update: (marker, lines, offset), the updates made
#: then being the lines printed in all plus offset, or one more (the last not yet printed).
CTRL_C_AFTER = {"actor_critic_ctrl_c_auto": ("Episode", 8, 0),  # printed after its update
                "tiny_grpo_ctrl_c_auto": (": kl=", 4, -1)}  # printed just before its update
#: The stages each auto-traced script must show, top-down in the script's order.
AUTO_ORDER = {
    "grpo_auto": ["rollout", "compute_rewards", "group_advantages", "sequences_log_probs/model",
                  "ReplayBuffer.append", "sequences_log_probs/model+grad", "GRPOLoss"],
    "actor_critic_auto": ["Policy", "finish_episode"],
    "grpo_class_auto": ["GRPOTrainer.sample_prompts", "GRPOTrainer.generate", "GRPOTrainer.score",
                        "GRPOTrainer.advantages", "GRPOTrainer.policy_loss", "GRPOTrainer.train_step"],
    # a function that calls the model comes before it, as the script calls them
    "a2c_replay_auto": ["GridWalk.reset", "act", "ActorCritic", "GridWalk.step", "discounted_returns", "update"],
    "grpo_loader_auto": ["Prompts/0", "TinyLM.generate", "TinyLM.compute_log_probs",
                         "TinyLM.compute_log_probs+grad", "PolicyLoss", "AdamW.step"],
    # rollout, advantages, log-probs (policy, reference), the buffer and its padding, the
    # training log-probs, the loss and the update
    "tiny_grpo_auto": ["rollout", "group_advantages", "sequences_log_probs/model",
                       "sequences_log_probs/reference_model", "approx_kl_divergence", "ReplayBuffer.append",
                       "zero_pad_sequences", "sequences_log_probs/model+grad", "GRPOLoss", "Adam.step"],
    # an episode as main() runs it: reset, act (the policy inside), step the env, then learn
    "reinforce_auto": ["CartPole.reset", "select_action", "Policy", "CartPole.step", "finish_episode"],
    "actor_critic_upstream_auto": ["CartPole.reset", "select_action", "Policy", "CartPole.step",
                                   "finish_episode"],
    "actor_critic_ctrl_c_auto": ["CartPole.reset", "select_action", "Policy", "CartPole.step",
                                 "finish_episode"],
    "tiny_grpo_ctrl_c_auto": ["rollout", "group_advantages", "sequences_log_probs/model",
                              "sequences_log_probs/reference_model", "approx_kl_divergence",
                              "ReplayBuffer.append", "zero_pad_sequences", "sequences_log_probs/model+grad",
                              "GRPOLoss", "Adam.step"],
}
#: Stages the flow line has in the script's order that the picture may draw side by side.
AUTO_FLOW_ONLY = {
    "grpo_class_auto": ["GRPOTrainer.generate", "TinyPolicy", "GRPOTrainer.token_logprobs", "GRPOTrainer.remember",
                        "GRPOTrainer.token_logprobs+grad", "TinyPolicy+grad", "GRPOTrainer.policy_loss"],
}
#: (policy, learning stage): the arrows drawn on the first view lead from one to the other.
AUTO_FED = {"grpo_auto": ("TinyLM+grad", "Adam.step"), "actor_critic_auto": ("Policy", "finish_episode"),
            "grpo_class_auto": ("TinyPolicy+grad", "GRPOTrainer.train_step"), "a2c_replay_auto": ("ActorCritic", "update"),
            "grpo_loader_auto": ("TinyLM.compute_log_probs+grad", "AdamW.step"),
            "tiny_grpo_auto": ("sequences_log_probs/model+grad", "Adam.step"),
            "reinforce_auto": ("Policy", "finish_episode"), "actor_critic_upstream_auto": ("Policy", "finish_episode"),
            "actor_critic_ctrl_c_auto": ("Policy", "finish_episode"),
            "tiny_grpo_ctrl_c_auto": ("sequences_log_probs/model+grad", "Adam.step")}
#: What counted the steps, and how many (the scripts' arguments above).
AUTO_STEPS = {"grpo_auto": (6, "torch.optim.Adam.step"), "actor_critic_auto": (6, "torch.optim.Adam.step"),
              "grpo_class_auto": (6, "torch.optim.AdamW.step"), "a2c_replay_auto": (6, "torch.optim.RMSprop.step"),
              "grpo_loader_auto": (5, "torch.optim.AdamW.step"),
              # 3 prompt batches of 8 rollouts, trained 4 at a time: two updates each
              "tiny_grpo_auto": (6, "torch.optim.Adam.step"), "reinforce_auto": (6, "torch.optim.Adam.step"),
              "actor_critic_upstream_auto": (6, "torch.optim.Adam.step")}
WIDTH, HEIGHT = 1280, 800

# Everything the checks need, read off the page as drawn: rectangles in CSS px.
MEASURE = """(function () {
  function box(r) { return [r.left, r.top, r.right, r.bottom]; }
  function shown(e) {
    for (var n = e; n && n !== document; n = n.parentNode) if (getComputedStyle(n).display === 'none') return false;
    return true;
  }
  var D = JSON.parse(document.getElementById('flowmap-data').textContent);
  var owners = Array.from(document.querySelectorAll('#graph g.owner')).map(function (g) {
    var t = g.querySelector('text');
    return { id: g.dataset.owner, name: g.querySelector('title').textContent.split('\\n')[0], text: t.textContent,
             driver: g.classList.contains('driver'), rect: box(g.querySelector('rect').getBoundingClientRect()),
             label: box(t.getBoundingClientRect()),
             px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a };
  });
  var labels = Array.from(document.querySelectorAll('#graph text.elabel')).map(function (t) {
    var g = t.parentNode, spans = t.querySelectorAll('tspan');
    return { flow: g.dataset.flow || null, seam: g.dataset.seam || null, shown: shown(t),
             name: spans[0].textContent, figure: spans[1].textContent, rect: box(t.getBoundingClientRect()),
             px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a };
  });
  var lines = Array.from(document.querySelectorAll('#graph g.seam, #graph g.flow-edge')).filter(shown).map(function (g) {
    var p = g.querySelector('path.line'), n = p.getTotalLength(), m = p.getScreenCTM();
    function at(f) { var q = p.getPointAtLength(n * f); return [q.x * m.a + q.y * m.c + m.e, q.x * m.b + q.y * m.d + m.f]; }
    return { flow: g.dataset.flow || null, seam: g.dataset.seam || null, back: g.classList.contains('back'),
             dashed: getComputedStyle(p).strokeDasharray !== 'none', from: at(0), to: at(1) };
  });
  var flowRows = {};
  document.querySelectorAll('#flow-table tr[data-flow]').forEach(function (r) { flowRows[r.dataset.flow] = r.children[1].textContent; });
  var seamRows = {};
  document.querySelectorAll('#seams tr[data-seam]').forEach(function (r) { seamRows[r.dataset.seam] = r.children[1].textContent; });
  return { panel: box(document.getElementById('graph').getBoundingClientRect()), owners: owners, labels: labels,
           lines: lines, flowRows: flowRows, seamRows: seamRows, data: { flow: D.flow || null, seams: D.seams },
           legend: document.querySelector('#graph-panel .legend').textContent };
})()"""


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def _inside(inner: list[float], outer: list[float], slack: float = 1.0) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack
            and inner[2] <= outer[2] + slack and inner[3] <= outer[3] + slack)


class TracedRuns(dict):
    """Each script traced the first time a test asks for it, so `-k name` traces one."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root
        self.printed: dict[str, int] = {}  # a stopped script's episodes, as it printed them

    def __missing__(self, name: str):
        script, args = SCRIPTS[name]
        if name in NEEDS_TRANSFORMERS:
            pytest.importorskip("transformers")
        run_dir = str(self.root / name)
        command = [sys.executable, "-m", "flowmap", "trace", "-o", run_dir, script, *args]
        if name in CTRL_C_AFTER:
            self.printed[name] = _trace_and_ctrl_c(command, self.root, *CTRL_C_AFTER[name][:2])
        else:
            r = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=self.root)
            assert r.returncode == 0, r.stderr
        run = flowmap.load(run_dir)
        self[name] = (run, write_html(run.view, self.root / f"{name}.html"))
        return self[name]


def _trace_and_ctrl_c(command: list[str], cwd, marker: str, lines: int) -> int:
    """Run `command` in a process group of its own; SIGINT to the group once it printed
    `lines` lines holding `marker`. How many it printed in all."""
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, process_group=0,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = 0
        assert proc.stdout is not None
        for line in proc.stdout:
            seen += marker in line
            if seen >= lines:
                break
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        seen += sum(marker in line for line in out.splitlines())
    finally:
        if proc.poll() is None:
            proc.kill()
    assert seen >= lines and proc.returncode == 130, err[-3000:]
    assert "flowmap: interrupted (Ctrl-C)" in err
    return seen


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return TracedRuns(tmp_path_factory.mktemp("pipeline_view"))


def first_view(browser, runs, name, tmp_path):
    run, path = runs[name]
    page = browser.open_report(path, width=WIDTH, height=HEIGHT)
    page.screenshot(str(tmp_path / f"{name}.png"))  # kept by pytest's tmp_path for a look
    m = page.eval(MEASURE)
    assert page.errors() == []
    return run, m


def layout_faults(m: dict) -> dict[str, list]:
    """What a person would see wrong: boxes cut or outside, overlaps, small text."""
    owners, shown = m["owners"], [lb for lb in m["labels"] if lb["shown"]]
    texts = [(o["text"], o["label"]) for o in owners] + [(lb["name"], lb["rect"]) for lb in shown]
    return {
        "outside": [o["name"] for o in owners if not _inside(o["rect"], m["panel"])],
        "name_cut": [o["name"] for o in owners if not _inside(o["label"], o["rect"])],
        "boxes_overlap": [(a["name"], b["name"]) for i, a in enumerate(owners) for b in owners[i + 1:]
                          if _overlap(a["rect"], b["rect"])],
        "labels_overlap": [(a[0], b[0]) for i, a in enumerate(texts) for b in texts[i + 1:] if _overlap(a[1], b[1])],
        "label_on_box": [(lb["name"], o["name"]) for lb in shown for o in owners if _overlap(lb["rect"], o["rect"])],
        "small": [(t, round(px, 2)) for t, px in
                  [(o["text"], o["px"]) for o in owners] + [(lb["name"], lb["px"]) for lb in shown] if px < 11],
    }


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_first_view_is_whole_unoverlapped_and_legible(browser, runs, name, tmp_path):
    run, m = first_view(browser, runs, name, tmp_path)
    assert len(m["owners"]) == len(run.view.owners)
    assert layout_faults(m) == {"outside": [], "name_cut": [], "boxes_overlap": [], "labels_overlap": [],
                                "label_on_box": [], "small": []}
    # the labels the graph draws: the black arrows' where it draws the flow (its faint seams
    # are unlabelled, the legend says so), else every seam's
    drawn = [lb for lb in m["labels"] if (lb["flow"] if m["data"]["flow"] else lb["seam"])]
    assert not any(lb["shown"] for lb in m["labels"] if lb not in drawn)
    shown = [lb for lb in drawn if lb["shown"]]
    # every drawn edge's label is on the first view, not only at 1:1: each found a place on
    # its own line (tiny-grpo's 24 arrows between 15 owners once showed none)
    assert len(shown) == len(drawn), [lb["name"] for lb in drawn if not lb["shown"]]
    assert "edge labels hidden" not in m["legend"]  # (the legend counts those hidden: test_html_edge_labels)
    if m["data"]["flow"]:  # faint lines, where any is drawn, are explained; none doubles an arrow
        faint = [ln["seam"] for ln in m["lines"] if ln["seam"]]
        assert ("faint line: a seam between two stages (its figure in the Seams table)" in m["legend"]) \
            == bool(faint)
        arrows = {frozenset((f["src"], f["dst"])) for f in m["data"]["flow"]["edges"]}
        ends = {s["id"]: frozenset((s["src"], s["dst"])) for s in m["data"]["seams"]}
        assert [f for f in faint if ends[f] in arrows] == []


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_edge_figures_are_the_tables(browser, runs, name, tmp_path):
    _, m = first_view(browser, runs, name, tmp_path)
    for lb in m["labels"]:
        if lb["flow"]:
            assert lb["figure"] == m["flowRows"][lb["flow"]], lb
        else:  # the seam table's column is bytes/step: the label adds the unit
            assert lb["figure"].removesuffix("/step") == m["seamRows"][lb["seam"]], lb
    if m["data"]["flow"]:
        assert len(m["flowRows"]) == len(m["data"]["flow"]["edges"]) > 0
        assert all(f != "0 B/step" for f in m["flowRows"].values())
        assert "black arrow: data a stage made, used by a later one" in m["legend"]


@pytest.mark.parametrize("name", ["grpo", "actor_critic", "driver_star"])
def test_the_driver_is_one_node_not_a_star(browser, runs, name, tmp_path):
    run, m = first_view(browser, runs, name, tmp_path)
    [driver] = [o for o in m["owners"] if o["driver"]]
    assert driver["name"] == "main" and driver["text"] == "main (driver)"
    driver_seams = {s["id"] for s in m["data"]["seams"] if driver["id"] in (s["src"], s["dst"])}
    assert len(driver_seams) >= 10  # drawn as seams, this run is a star around main
    drawn = [ln for ln in m["lines"] if ln["seam"] in driver_seams
             or (ln["flow"] and driver["id"] in _ends(m, ln["flow"]))]
    assert drawn == []
    assert f"its {len(driver_seams)} seams are in the table" in m["legend"]
    assert len(m["seamRows"]) == len(run.view.seams)  # listed all the same


def _ends(m: dict, flow_id: str) -> tuple[str, str]:
    [f] = [f for f in m["data"]["flow"]["edges"] if f["id"] == flow_id]
    return f["src"], f["dst"]


def test_grpo_stages_go_down_in_flow_order_and_the_weights_come_back_up(browser, runs, tmp_path):
    run, m = first_view(browser, runs, "grpo", tmp_path)
    top = {o["name"]: o["rect"][1] for o in m["owners"]}
    path = ["load_prompts", "repeat_for_group", "generate", "zero_pad_sequences", "compute_rewards",
            "group_advantages", "ReplayBuffer.append", "policy_logprobs", "grpo_loss", "optimizer_step"]
    order = list(run.view.flow.stages)  # the flow line; the boxes follow its arrows (below)
    assert [order.index(s) for s in path] == sorted(order.index(s) for s in path), order
    assert top["load_prompts"] < top["generate"] < top["grpo_loss"] < top["optimizer_step"]
    # fed only through the driver, the buffer's sample follows the stage before it in the
    # flow, not start at the top
    assert top["ReplayBuffer.sample"] >= top["ReplayBuffer.append"]
    # the weight sync, whose data only goes back up, sits by the stage it feeds (below)
    by_id = {o["id"]: o["name"] for o in m["owners"]}
    for ln in m["lines"]:
        if ln["flow"] and not ln["back"]:
            assert ln["to"][1] > ln["from"][1]  # forward edges point down the page
    [sync] = [ln for ln in m["lines"] if ln["flow"] and
              tuple(by_id[e] for e in _ends(m, ln["flow"])) == ("sync_weights", "generate")]
    assert sync["back"] and sync["dashed"] and sync["to"][1] < sync["from"][1]  # drawn back up, dashed
    assert "dashed: back edge closing the loop" in m["legend"]


def test_the_demo_closes_its_weight_loop(browser, runs, tmp_path):
    _, m = first_view(browser, runs, "demo", tmp_path)
    seams = {s["id"]: s for s in m["data"]["seams"]}
    names = {o["id"]: o["name"] for o in m["owners"]}
    back = [ln for ln in m["lines"] if ln["seam"] and ln["back"]]
    assert any(names[seams[ln["seam"]]["src"]] == "weight_sync" and names[seams[ln["seam"]]["dst"]].startswith("rollout")
               for ln in back)
    assert all(ln["dashed"] for ln in back)


@pytest.mark.parametrize("name", list(AUTO_ORDER))
def test_auto_traced_scripts_read_in_order_and_feed_the_learner(browser, runs, name, tmp_path):
    """`flowmap trace SCRIPT` alone: the flow line and the boxes go in the script's order,
    the learning stage is fed by an arrow from the policy, and the driver stays one node."""
    run, m = first_view(browser, runs, name, tmp_path)
    assert m["data"]["flow"], "no flow drawn"
    order = list(run.view.flow.stages)
    path = AUTO_ORDER[name]
    assert [order.index(s) for s in path] == sorted(order.index(s) for s in path), order
    flow_only = AUTO_FLOW_ONLY.get(name, [])
    assert [order.index(s) for s in flow_only] == sorted(order.index(s) for s in flow_only), order
    top = {o["name"]: o["rect"][1] for o in m["owners"]}
    rank = {s: k for k, s in enumerate(order)}
    for f in m["data"]["flow"]["edges"]:  # every arrow down the flow points down the page
        src, dst = (next(o["name"] for o in m["owners"] if o["id"] == f[k]) for k in ("src", "dst"))
        if rank.get(src, 0) < rank.get(dst, 0):
            assert top[dst] > top[src], (src, dst)
    if name in CTRL_C_AFTER:  # stopped: every update made, the last perhaps not yet printed
        made = runs.printed[name] + CTRL_C_AFTER[name][2]
        assert made <= run.view.step_count <= made + 1, (made, run.view.step_count)
        assert run.view.steps_from == "torch.optim.Adam.step" and "interrupted" in run.view.ending.sentence
    else:
        assert (run.view.step_count, run.view.steps_from) == AUTO_STEPS[name]
    by_id = {o["id"]: o["name"] for o in m["owners"]}
    arrows = {tuple(by_id[e] for e in (f["src"], f["dst"])) for f in m["data"]["flow"]["edges"]}
    policy, learner = AUTO_FED[name]
    reached, todo = {policy}, [policy]
    while todo:
        at = todo.pop()
        for src, dst in arrows:
            if src == at and dst not in reached:
                reached.add(dst)
                todo.append(dst)
    assert learner in reached, arrows
    assert [o["text"] for o in m["owners"] if o["driver"]] == ["main (driver)"]
    assert "(untraced)" not in order
    assert not [s for s in order if s.startswith("_worker_loop")]  # a stage the script wrote, not torch's
    assert min([o["px"] for o in m["owners"]] + [lb["px"] for lb in m["labels"] if lb["shown"]]) >= 11

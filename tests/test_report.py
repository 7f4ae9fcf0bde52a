"""`dagflow report`: real runs (the region-retrain example, a search) written as one HTML page and opened
in headless Chromium; hostile values escaped; waste called out from usage records; bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_report_support import assert_real_picture, console_errors, open_page
from test_search_scheduler_support import search_cli, write_pipeline

from dagflow.engines.registry import spec_checks
from dagflow.plan.expand import expand
from dagflow.run.layout import RunLayout
from dagflow.run.usage import NodeUsage, read_usage, record_usage
from dagflow.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "region-retrain"
RUN_TIMEOUT_S = 600  # a real run on a loaded machine; only here to stop a hang


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True,
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip


def no_network_references(html: str) -> list[str]:
    """Anything the page would fetch: src/href/url() pointing anywhere but inside the page."""
    fetched = re.findall(r"""(?:src|href)\s*=\s*["']?(?!#)([^"'\s>]+)""", html)
    fetched += re.findall(r"url\((?!#)([^)]*)\)", html)
    return fetched + re.findall(r"@import", html)


@pytest.mark.slow
def test_region_retrain_report_renders_in_chromium(tmp_path: Path) -> None:
    work = tmp_path / "region-retrain"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns(".dagflow", "data", "models", "reports"))
    ran = dagflow("run", "pipeline.yaml", "--jobs", "2", cwd=work)
    assert ran.returncode == 0, ran.stderr
    made = dagflow("report", "--png", str(tmp_path / "states.png"), cwd=work)
    assert made.returncode == 0, made.stderr
    page = Path(made.stdout.splitlines()[0])
    run_dir = page.parent
    assert page.name == "report.html" and (run_dir / "plan.json").is_file()
    html = page.read_text(encoding="utf-8")

    plan = json.loads((run_dir / "plan.json").read_text())
    names = [node["name"] for node in plan["nodes"]]
    assert len(names) == 13
    for name in names:
        assert f"<td>{name}</td>" in html  # the node table
        assert f">{name}</text>" in html  # a box of its own in the DAG picture
    for section in ("dag", "timeline", "resources", "regions", "nodes"):
        assert f'id="{section}"' in html
    for region in ("us", "br", "de", "jp"):  # each region's val_loss, from its metrics file
        metrics = json.loads((work / "models" / region / "metrics.json").read_text())
        assert f'data-v="{metrics["val_loss"]!r}"' in html
    attempts = len(read_usage(run_dir))  # what the local engine measured, if anything
    assert (f"{attempts} measured attempts" in html) == (attempts > 0)
    assert html.count("<script") == 1 and no_network_references(html) == []

    loaded = open_page(page, tmp_path / "report.png")
    assert console_errors(loaded.console) == []
    assert 'data-ready="1"' in loaded.dom and 'data-boxes="13"' in loaded.dom  # the page's script ran
    width, height = assert_real_picture(loaded.screenshot, min_colours=30)
    assert (width, height) == (1280, 1600)
    assert_real_picture(tmp_path / "states.png")


@pytest.mark.slow
def test_console_check_sees_a_script_error(tmp_path: Path) -> None:
    """The control for the check above: a page whose script throws is caught."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><p id="x">x</p><script>undefinedFunction();</script></body></html>')
    loaded = open_page(page, tmp_path / "broken.png")
    assert any("undefinedFunction" in line for line in console_errors(loaded.console))


@pytest.mark.slow
def test_search_reports_show_convergence_and_trials(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=4, parallel=2, optimizer="random")
    searched = search_cli("run", str(pipeline), "--poll", "0.05", "--seed", "3", cwd=tmp_path, timeout=RUN_TIMEOUT_S)
    assert searched.returncode == 0, searched.stderr
    made = dagflow("report", "quad-t2", "--out", str(tmp_path / "trial.html"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = (tmp_path / "trial.html").read_text(encoding="utf-8")
    assert 'id="search"' in html and "this run is trial t2" in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="convergence"') == 1
    for number in range(1, 5):
        assert f">quad-t{number}</td>" in html  # the trials table names every trial's run
    assert html.count("<circle ") == 4  # one dot per successful trial

    whole = dagflow("report", "--search", "quad", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    search_page = Path(whole.stdout.strip())
    assert search_page == tmp_path / ".dagflow" / "searches" / "quad-report.html"
    loaded = open_page(search_page, tmp_path / "search.png")
    assert console_errors(loaded.console) == [] and 'data-ready="1"' in loaded.dom
    assert loaded.dom.count("<circle ") == 4
    assert_real_picture(loaded.screenshot)


HOSTILE_STEP = r"""name: hostile
matrix:
  region: [us, de]
steps:
  evaluate:
    kind: evaluate
    command: [python, -c, "import json,sys; json.dump({{'<script>alert(1)</script>': 1.5, 'note': '\"><img src=x onerror=alert(2)>', 'val_loss': 0.25}}, open(sys.argv[1], 'w'))", "m-{region}.json"]
    metrics: m-{region}.json
    classads: {Team: "<script>alert('ad')</script> \"quoted\""}
    requirements: 'Machine =!= "<b>x</b>"'
"""  # noqa: E501


@pytest.mark.slow
def test_hostile_values_are_escaped(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(HOSTILE_STEP)
    ran = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "<img src=x" in (tmp_path / "m-us.json").read_text()
    run_dir = next(path for path in (tmp_path / ".dagflow" / "runs").iterdir() if path.is_dir())
    hostile = '<script>alert("usage")</script>\'"'
    record_usage(run_dir, NodeUsage(
        node="evaluate.us", step="evaluate", attempt=9, engine="local", started=None, ended=None, wall_s=1.0,
        cpu_s=0.5, peak_memory_mb=10.0, gpu_memory_peak_mb=None, gpu_utilization_pct=None, host=hostile,
        slot=hostile, requested={}, allocated={}, exit_code=1, reason=f"held: {hostile}", extra={"x": hostile},
    ))  # fmt: skip
    made = dagflow("report", str(run_dir) + "/", "--out", str(tmp_path / "r.html"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.count("<script") == 1  # the page's own, nothing injected
    assert "<img" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the metric name, shown as text
    assert "&lt;img src=x onerror=alert(2)&gt;" in html  # the metric value
    assert "Team = &quot;&lt;script&gt;alert(&#x27;ad&#x27;)" in html  # the ClassAd
    assert "held: &lt;script&gt;alert(&quot;usage&quot;)" in html  # a usage record's reason

    loaded = open_page(tmp_path / "r.html", tmp_path / "r.png")
    assert console_errors(loaded.console) == [] and 'data-ready="1"' in loaded.dom
    assert "<img" not in loaded.dom and "<b>x" not in loaded.dom


def write_measured_run(root: Path) -> Path:
    """A finished run made the way an engine leaves one, with usage records of a greedy train step."""
    pipeline = root / "pipeline.yaml"
    pipeline.write_text(
        "name: waste\nmatrix:\n  region: [us, de]\nsteps:\n"
        "  train: {command: 'true', resources: {memory: 8GB, cpus: 4, gpus: 1, gpu_memory: 16GB}}\n"
        "  report: {command: 'true', needs: [train], over: [region]}\n"
    )
    plan = expand(load_spec(pipeline, spec_checks()), run_id="waste-1")
    layout = RunLayout(root / ".dagflow" / "runs", plan.run_id)
    layout.create(plan, engine="local")
    record_usage(layout.run_dir, NodeUsage(  # an earlier attempt of train.us, killed for memory
        node="train.us", step="train", attempt=1, engine="condor", started=None, ended=None, wall_s=None,
        cpu_s=None, peak_memory_mb=None, gpu_memory_peak_mb=None, gpu_utilization_pct=None, host=None, slot=None,
        requested={}, allocated={}, exit_code=None, reason="oom",
    ))  # fmt: skip
    events = [{"e": "run", "t": 1000.0, "pid": 1, "resume": False}]
    for index, name in enumerate(plan.nodes):
        events.append({"e": "start", "n": name, "a": 1, "pid": 2, "t": 1000.0 + 10 * index})
        events.append({"e": "end", "n": name, "a": 1, "s": "succeeded", "rc": 0, "t": 1009.0 + 10 * index})
        step = plan.nodes[name].step
        train = step == "train"
        asked = plan.steps[step].resources
        record_usage(layout.run_dir, NodeUsage(
            node=name, step=step, attempt=1, engine="condor", started=1000.0 + 10 * index,
            ended=1009.0 + 10 * index, wall_s=9.0, cpu_s=5.0 if train else 1.0,
            peak_memory_mb=600.0 if train else 50.0, gpu_memory_peak_mb=2048.0 if train else None,
            gpu_utilization_pct=20.0 if train else None, host="exec1.example", slot=f"slot1_{index}@exec1.example",
            requested={"cpus": asked.cpus, "memory_mb": asked.memory_mb, "gpus": asked.gpus,
                       "gpu_memory_mb": asked.gpu_memory_mb or 0},
            allocated={}, exit_code=0, reason=None,
        ))  # fmt: skip
    events.append({"e": "finish", "s": "succeeded", "t": 1040.0})
    layout.journal_path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return layout.run_dir


def test_waste_is_called_out_per_step(tmp_path: Path) -> None:
    run_dir = write_measured_run(tmp_path)
    made = dagflow("report", "waste-1", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "4 measured attempts" in html
    assert "requested 8.0 GB, HTCondor&#x27;s sampled peak 600 MB → 93% of memory unused" in html
    assert "requested 4 CPUs, used 0.56 on average → 86% of CPU idle" in html
    assert "<b>report</b>: requested 1.0 GB, HTCondor&#x27;s sampled peak 50 MB → 95% of memory unused" in html
    assert "requested 16.0 GB of GPU memory, peak 2.0 GB → 88% of GPU memory unused" in html
    assert "GPU busy 20% of the time on average" in html
    assert "<b>train</b>: 1 attempt ended: oom" in html
    for slot in ("slot1_0@exec1.example", "slot1_1@exec1.example", "slot1_2@exec1.example"):
        assert f">{slot}<title>" in html  # one timeline lane per slot the usage records name


@pytest.mark.slow
def test_report_bad_input_is_a_clean_error(tmp_path: Path) -> None:
    cases = [
        (("report",), "no runs under"),
        (("report", "no-such-run"), "no run 'no-such-run'"),
        (("report", "../bad id"), "not a run directory"),
        (("report", "--search", "nope"), "no search 'nope'"),
        (("report", "bad\nid"), "run id"),
    ]
    for args, message in cases:
        result = dagflow(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)


PROMOTING = """name: promo
matrix:
  region: [us, br]
steps:
  train:
    kind: train
    command: [python, -c, "import os; os.makedirs('out/{region}', exist_ok=True); open('out/{region}/model.txt', 'w').write('m')"]
    outputs:
      - out/{region}/model.txt
    publish: pub/{region}/{run.id}/
  evaluate:
    kind: evaluate
    needs: [train]
    command: [python, -c, "import json; loss = json.load(open('losses.json'))['{region}']; json.dump({{'val_loss': loss}}, open('out/{region}/metrics.json', 'w'))"]
    inputs: [losses.json]
    metrics: out/{region}/metrics.json
    promote_if:
      metric: val_loss
      better: lower
      than: pub/{region}/latest
"""  # noqa: E501


@pytest.mark.slow
def test_promotion_verdicts_per_region(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PROMOTING)
    (tmp_path / "losses.json").write_text('{"us": 0.5, "br": 0.5}')
    assert dagflow("run", "pipeline.yaml", cwd=tmp_path).returncode == 0
    (tmp_path / "losses.json").write_text('{"us": 0.25, "br": 0.75}')  # us gets better, br worse
    second = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    made = dagflow("report", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = Path(made.stdout.strip()).read_text(encoding="utf-8")
    assert "<h3>Promotion verdicts</h3>" in html
    rows = re.findall(r"<tr><td>(us|br)</td><td class=\"verdict-(\w+)\">\w+</td><td>val_loss</td>"
                      r"<td class=\"num\" data-v=\"([\d.]+)\">[^<]*</td><td class=\"num\" data-v=\"([\d.]+)\">",
                      html)  # fmt: skip
    assert sorted(rows) == [("br", "kept", "0.75", "0.5"), ("us", "promoted", "0.25", "0.5")]
    assert html.count('data-v="0.25"') >= 2  # us's val_loss in the metrics table too

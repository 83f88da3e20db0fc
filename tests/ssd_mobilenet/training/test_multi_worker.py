"""`migrate train` on two worker processes with `TF_CONFIG` (MultiWorkerMirroredStrategy over
127.0.0.1, free ports, bounded time): one worker killed mid-run ends the other with one line naming
it; both started again resume from the chief's last checkpoint and end the run, whose checkpoints
(the chief's) hold the one-process run's weights on the same global batches, before the kill and
after the resume. A small model (depth 0.25, 128 px, 3 classes), frozen batch norm (in training
mode each worker would normalise its own slice, as TF1's multi-clone training did:
tests/ssd_mobilenet/training/test_distribute.py), batch 8 (4 images per worker).

Tolerance: test_distribute's after two steps (rtol 1e-6, atol 5e-9 per variable): the workers'
gradients are summed by collective ops in another order than one device sums them. The
difference grows with the steps (RMSProp divides by the root of small second moments; measured,
as the largest |difference| / (atol + rtol |one process|) over the variables: 0.20 after 2 steps,
0.30 after 4, 0.60 after 6, 1.6e-6 relative after 20), so the run is compared at the checkpoint
before the kill (step 2; step 4 had the kill come late) and the first one after the resume (4; 6).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import REPO
from migrate.cli import main
from ssd_mobilenet import detector
from ssd_mobilenet.training.trainer import CHECKPOINT_DIR

# Long enough that a worker killed at step 2 never outruns the kill; every checkpoint (one every 2
# steps, the last 3 kept) stays.
STEPS = 6
KILLED_AT = 2  # the killed worker's last progress line: the chief's last checkpoint is of this step (or the next)
RTOL, ATOL = 1e-6, 5e-9
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def setup(small_model, tmp_path_factory):
    """A converted model (the TF1 builder's seeded weights, assigned as `convert` assigns them),
    records and training config (once per run: `small_model("training").training_inputs`), and a folder of this
    module's own."""
    return {**small_model("training").training_inputs, "root": tmp_path_factory.mktemp("multi_worker")}


@pytest.fixture(scope="module")
def reference(setup):
    """The one-process run's folder after `STEPS` steps, a checkpoint every 2 (in this process, without TF_CONFIG):
    `trainer.train` with the workers' settings, which is `train`'s run without its SavedModel
    export (the one-device side of test_distribute's comparison with `train`'s run)."""
    import tensorflow as tf

    from ssd_mobilenet.training import trainer
    from ssd_mobilenet.training.train_config import TrainingConfig
    out = setup["root"] / "one_process"
    # tf.data's shuffle combines its seed with TensorFlow's global seed, which another test of this
    # process may have set: none, as in the workers' fresh processes.
    tf.random.set_seed(None)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TF_CONFIG", raising=False)
        result = trainer.train(detector.load_model(setup["converted"]),
                               TrainingConfig.from_pipeline_config(setup["config"]), [setup["records"]], str(out),
                               steps=STEPS, batch_size=8, freeze_batch_norm=True, checkpoint_every=2)
    assert result["step"] == STEPS
    return str(out)


def _argv(s, out, steps) -> list:
    return ["train", s["converted"], "--train", s["records"], "--config", s["config"], "--steps", str(steps),
            "--batch", "8", "--freeze-batch-norm", "--checkpoint-every", "2", "--out", str(out)]


def _free_ports(n: int) -> list:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _start_workers(s, out, steps, logs) -> list:
    """Two `python -m migrate train` processes, workers 0 and 1 of one cluster on 127.0.0.1."""
    addresses = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for i in range(2):
        config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": i}}
        env = dict(os.environ, TF_CONFIG=json.dumps(config), PYTHONPATH=REPO)
        err = open(logs / f"worker{i}.err", "w")
        procs.append(subprocess.Popen([sys.executable, "-m", "migrate", *_argv(s, out, steps)], cwd=REPO, env=env,
                                      stdout=subprocess.DEVNULL, stderr=err))
    return procs, addresses


def _wait(procs) -> list:
    try:
        return [p.wait(timeout=TIMEOUT_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def _trained_weights(s, run, step=None) -> dict:
    """{variable path: value} of the model's own weights in a run's checkpoint of `step` (else its
    latest; the written model holds their moving averages, which two steps barely move)."""
    import tensorflow as tf
    model = detector.load_model(s["converted"])
    folder = os.path.join(run, CHECKPOINT_DIR)
    path = tf.train.latest_checkpoint(folder) if step is None else os.path.join(folder, f"ckpt-{step}")
    tf.train.Checkpoint(model=model).restore(path).expect_partial()
    return {v.path: v.numpy() for v in model.weights}


def _assert_same_weights(ours, ref) -> None:
    assert sorted(ours) == sorted(ref)
    for name, value in ref.items():
        np.testing.assert_allclose(ours[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.slow
def test_a_lost_worker_ends_the_other_in_one_line_and_both_resume(setup, reference, tmp_path):
    out = tmp_path / "run"
    procs, addresses = _start_workers(setup, out, STEPS, tmp_path)
    log, mark = tmp_path / "worker1.err", f"step {KILLED_AT}/{STEPS}"
    deadline = time.monotonic() + TIMEOUT_S
    while mark not in log.read_text() and time.monotonic() < deadline and procs[1].poll() is None:
        time.sleep(0.05)
    assert mark in log.read_text(), log.read_text()[-2000:]
    procs[1].kill()
    killed = time.monotonic()
    code = _wait(procs[:1])[0]
    assert code == 1 and time.monotonic() - killed < 90
    err = (tmp_path / "worker0.err").read_text()
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: worker 0 lost worker 1 ({addresses[1]}) after step ") and "resume" in last, last
    assert [l for l in err.splitlines() if l.startswith("error:")] == [last]
    assert not (out / "model").exists()
    import tensorflow as tf
    # The two workers' run up to the kill: the chief's last checkpoint, of the killed worker's last
    # step (or, had a starved test process killed it late, of the next checkpoint's), holds the
    # one-process run's weights (the gradients summed by collective ops across the workers).
    latest = int(tf.train.latest_checkpoint(str(out / CHECKPOINT_DIR)).rsplit("-", 1)[1])
    assert latest in (KILLED_AT, KILLED_AT + 2), latest
    ours = _trained_weights(setup, str(out), latest)
    _assert_same_weights(ours, _trained_weights(setup, reference, latest))
    initial = {v.path: v.numpy() for v in detector.load_model(setup["converted"]).weights}
    assert max(float(np.abs(ours[k] - initial[k]).max()) for k in initial) > 1e-3  # training moved them
    # Both started again: they resume from the chief's last checkpoint, take the steps after it
    # (the same global batches, the same state: its next checkpoint holds the one-process run's
    # weights too) and end the run.
    again = tmp_path / "again"
    again.mkdir()
    procs, _ = _start_workers(setup, out, STEPS, again)
    assert _wait(procs) == [0, 0], (again / "worker0.err").read_text()[-2000:]
    chief = (again / "worker0.err").read_text()
    assert "resuming the run" in chief
    steps = [int(n) for n in re.findall(rf"step (\d+)/{STEPS}: loss", chief)]
    assert steps == list(range(latest + 1, STEPS + 1)), steps
    _assert_same_weights(_trained_weights(setup, str(out), latest + 2),
                         _trained_weights(setup, reference, latest + 2))
    # The chief's checkpoints are the run; the other worker's temporary folder is gone.
    assert sorted(os.listdir(out)) == [CHECKPOINT_DIR, "model"]
    assert {f"ckpt-{latest}.index", f"ckpt-{STEPS}.index"} <= set(os.listdir(out / CHECKPOINT_DIR))
    for i in range(2):
        assert f"trained to step {STEPS}" in (again / f"worker{i}.err").read_text()


def test_force_is_refused_under_tf_config(setup, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                                                "task": {"type": "worker", "index": 0}}))
    assert main(_argv(setup, tmp_path / "run", 2) + ["--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --force: TF_CONFIG is set"), err

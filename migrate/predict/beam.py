"""`predict --engine beam`: a model over image archives as an Apache Beam pipeline.

    sources --Create--> match (Beam's file systems) --Reshuffle--> read bytes
            --RunInference(RuntimeHandler)--> JSON line --WriteToText--> OUT shards

- Sources are files, folders (every JPEG/PNG below them, hidden entries skipped, as `predict`
  lists them) and file patterns (`photos/*.jpg`, `gs://bucket/frames/**`), matched and read on
  the workers through `apache_beam.io.filesystems.FileSystems`: local paths, and gs://, s3://,
  hdfs:// where Beam's extras for them are installed.
- The model: `RuntimeHandler` opens `predict`'s own runtime (`migrate.predict.runtimes.open_runtime`:
  TensorFlow for a converted directory, LiteRT for a `.tflite` file, ONNX Runtime for an `.onnx`
  file) once per worker process;
  RunInference shares it among that process's threads. Its batches (`BatchElements`, up to
  `batch_size` images) go to `runtime.results_of_encoded`, which decodes and resizes them
  with the ops `predict` uses, so each image's line is `predict`'s line for it.
- Output: `migrate.predict.prediction.record`'s JSON lines, one per image, in shards named after OUT
  (`results.jsonl` -> `results-00000-of-00002.jsonl`, ...), in no particular order. Beam writes
  them into a temporary folder and renames them into place when every bundle has finished.
- An unreadable image is a line with its error (and a warning), never a failed pipeline.

Runners: without `--runner` in the pipeline options, Beam's local runner (`LOCAL_RUNNER`) with `workers`
processes (`direct_running_mode=multi_processing`), which share the machine's cores: each runs
TensorFlow's or LiteRT's kernels on the CPU count over `workers` threads. On a cluster runner the model and the
images must be at paths every worker can read, and the workers need this package installed
(docs/guides/predict.md: "Batch inference on Apache Beam").
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.ml.inference.base import ModelHandler, RunInference
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from migrate.predict import prediction
from migrate.common import console, images
from migrate.predict.runtimes import runtime_kind
from migrate.predict.runtimes.base import DEFAULT_BATCH, Result
from ssd_mobilenet import converted_dir
from ssd_mobilenet.errors import OutputExistsError, RunError
from ssd_mobilenet.errors import InputError

NAMESPACE = "ssd_mobilenet_migrate"
PROGRESS_EVERY_S = 5.0
_GLOB = re.compile(r"[*?\[]")
_DIRECT_RUNNERS = ("directrunner", "direct", "fnapirunner", "prismrunner")
LOCAL_RUNNER = "FnApiRunner"  # the local runner without --runner (`pipeline_options`)


@dataclass(frozen=True)
class Source:
    """One input: `pattern` for `FileSystems.match`; `root`, the folder below which hidden
    entries and files that are not JPEG or PNG are left out (None: a file named explicitly,
    taken as it is, as `predict` takes it)."""

    pattern: str
    root: str | None
    # A pattern without a folder (`*.jpg`), which Beam's local file system matches only as
    # `./*.jpg`: the `./` is taken off the paths again, so they read as the user wrote them.
    dot_added: bool = False


def _is_url(path: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path) is not None


def sources(inputs) -> list:
    """Command-line inputs -> `Source`s, checked on the driver.

    Raises:
      InputError: naming the input, for a missing local path, a local file that is not a
        JPEG or PNG, or a pattern that matches nothing.
    """
    found = []
    for item in map(os.fspath, inputs):
        if not _is_url(item) and os.path.isdir(item):
            found.append(Source(os.path.join(item, "**"), item))
        elif not _is_url(item) and os.path.isfile(item):
            if not images.is_image_file(item):
                raise InputError(f"{item}: not a JPEG or PNG image (neither by extension nor content)")
            found.append(Source(item, None))
        elif _is_url(item) or _GLOB.search(item):
            dot_added = not _is_url(item) and not os.path.dirname(_GLOB.split(item, 1)[0])
            pattern = os.path.join(os.curdir, item) if dot_added else item
            try:
                matched = FileSystems.match([pattern], [1])[0].metadata_list
            except Exception as e:  # noqa: BLE001 - Beam's file systems raise their own kinds (no scheme, no access)
                raise InputError(f"{item}: cannot list: {_first_line(e)}") from None
            if not matched:
                raise InputError(f"{item}: no file matches")
            prefix = _GLOB.split(pattern, 1)[0]
            found.append(Source(pattern, prefix if prefix.endswith("/") else os.path.dirname(prefix), dot_added))
        else:
            raise InputError(f"{item}: no such file or folder")
    return found


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def _worker_error(error: BaseException) -> str:
    """The line that says what failed: a runner's exception carries the worker's traceback as
    text, whose last `module.SomeError: message` line is the cause."""
    causes = re.findall(r"^\s*(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit)): (.+?)(?: \[while running [^\]]*\])?$",
                        str(error), re.MULTILINE)
    if causes:
        name, message = causes[-1]
        return f"{name}: {message}"[:400]
    return _first_line(error)


def _open(path: str):
    # UNCOMPRESSED: Beam would otherwise decompress a file named *.gz by its extension.
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def matched_images(source: Source):
    """The image paths of one `Source` (runs on a worker): `predict`'s listing rules below a
    folder or pattern's fixed prefix (no hidden entries; JPEG or PNG by extension or content)."""
    if source.root is None:
        yield source.pattern
        return
    for metadata in FileSystems.match([source.pattern])[0].metadata_list:
        path = metadata.path
        below = path[len(source.root):] if path.startswith(source.root) else os.path.basename(path)
        if any(part.startswith(".") for part in re.split(r"[/\\]", below)):
            continue  # `.git/`, macOS `._photo.jpg`: metadata, not images
        if images.has_image_extension(path) or _has_image_magic(path):
            yield path[len(os.curdir + os.sep):] if source.dot_added else path


def _has_image_magic(path: str) -> bool:
    try:
        with _open(path) as f:
            return images.has_image_magic(f.read(len(images.PNG_MAGIC)))
    except Exception:  # noqa: BLE001 - unreadable: not listed, as `images.list_images` does
        return False


def read(path: str) -> tuple:
    """path -> (path, encoded bytes, None), or (path, None, why) when it cannot be read."""
    try:
        with _open(path) as f:
            return path, f.read(), None
    except Exception as e:  # noqa: BLE001 - any file system's error is this image's result, not the pipeline's
        return path, None, f"cannot read image: {_first_line(e)}"


class RuntimeHandler(ModelHandler):
    """RunInference's model handler for `predict`'s runtimes: elements are `read`'s triples,
    predictions `migrate.predict.runtimes.base.Result`s, in the same order."""

    def __init__(self, model: str, runtime_options: dict, batch_size: int):
        super().__init__()
        self.model, self.runtime_options, self.batch_size = model, runtime_options, batch_size

    def load_model(self):
        from migrate.common import console
        from migrate.predict.runtimes import open_runtime
        if os.path.isdir(self.model):
            console.quiet_worker()  # TensorFlow's import lines, in a worker of a quiet command
        return open_runtime(self.model, **self.runtime_options)

    def run_inference(self, batch, model, inference_args=None):
        readable = [(path, data) for path, data, error in batch if error is None]
        results = iter(model.results_of_encoded(readable) if readable else [])
        return [next(results) if error is None else Result(path, error=error) for path, _, error in batch]

    def batch_elements_kwargs(self):
        return {"min_batch_size": 1, "max_batch_size": self.batch_size}

    def get_metrics_namespace(self) -> str:
        return NAMESPACE


class ToLine(beam.DoFn):
    """`Result` -> its JSON line (`migrate.predict.prediction.record`), counted; unreadable images warned
    on the worker's stderr; progress every PROGRESS_EVERY_S per worker process."""

    def __init__(self, labels, min_score: float, quiet: bool):
        self.labels, self.min_score, self.quiet = labels, min_score, quiet
        self.images = Metrics.counter(NAMESPACE, "images")
        self.unreadable = Metrics.counter(NAMESPACE, "unreadable")
        self.detections = Metrics.counter(NAMESPACE, "detections")

    def setup(self):
        self.progress = _progress_of_this_process()

    def process(self, result):
        line = prediction.record(result, self.labels, self.min_score)
        self.images.inc()
        if result.error is not None:
            self.unreadable.inc()
            print(f"warning: {result.path}: {result.error}", file=sys.stderr, flush=True)
        else:
            self.detections.inc(line["num_detections"])
        if not self.quiet:
            self.progress.one_more()
        yield json.dumps(line)


class _Progress:
    """Images done by every thread of one worker process, reported every PROGRESS_EVERY_S."""

    def __init__(self):
        self.lock, self.done, self.start = threading.Lock(), 0, None

    def one_more(self):
        with self.lock:
            now = time.perf_counter()
            if self.start is None:  # from the first image on: the model has loaded
                self.start = self.last = now
            self.done += 1
            if now - self.last < PROGRESS_EVERY_S:
                return
            self.last = now
            print(f"[migrate] worker {os.getpid()}: {self.done} images, {self.done / (now - self.start):.1f} "
                  "images/s", file=sys.stderr, flush=True)


_PROCESS_PROGRESS = []


def _progress_of_this_process() -> _Progress:
    if not _PROCESS_PROGRESS:
        _PROCESS_PROGRESS.append(_Progress())
    return _PROCESS_PROGRESS[0]


def shard_names(out: str) -> tuple:
    """OUT -> (prefix, suffix) of its shards: `results.jsonl` -> ("results", ".jsonl")."""
    base, ext = os.path.splitext(out)
    return (base, ext) if ext and "/" not in ext else (out, "")


def _existing_shards(prefix: str, suffix: str) -> dict:
    """{shard path: its modification time} of the shards of OUT that exist (local paths absolute)."""
    if not _is_url(prefix):
        prefix = os.path.abspath(prefix)  # Beam's local file system matches a relative pattern to nothing
    pattern = f"{prefix}-*-of-*{suffix}"
    try:
        return {m.path: m.last_updated_in_seconds for m in FileSystems.match([pattern])[0].metadata_list
                if re.fullmatch(re.escape(prefix) + r"-\d+-of-\d+" + re.escape(suffix), m.path)}
    except Exception:  # noqa: BLE001 - a folder that does not exist yet holds no shards
        return {}


def pipeline_options(workers: int | None, extra: str | None) -> tuple:
    """-> (PipelineOptions, the runner's description, the local runner's worker processes or None
    for another runner) for `--workers` and `--pipeline-options`.

    Raises:
      InputError: `--pipeline-options` that do not parse, or `--workers` with a runner
        that counts its workers with its own option.
    """
    try:
        args = shlex.split(extra or "")
    except ValueError as e:
        raise InputError(f"--pipeline-options: {e}") from None
    runner = PipelineOptions(args).view_as(StandardOptions).runner
    local = None
    if runner is None or str(runner).lower() in _DIRECT_RUNNERS:
        local = workers or 1
        # Without --runner Beam's DirectRunner first tries its Prism runner, which downloads a binary
        # into ~/.apache_beam and leaves beam-temp*, beam-requirements-cache and tmp* folders in the
        # temporary folder, then falls back to the FnApiRunner that runs these worker processes:
        # named, that one runs straight away and leaves nothing.
        args = [*([] if runner else [f"--runner={LOCAL_RUNNER}"]), f"--direct_num_workers={local}",
                "--direct_running_mode=multi_processing", *args]
        described = f"Beam's local runner ({local} worker{'s' if local > 1 else ''})"
    elif workers is not None:
        # Another runner counts its workers with its own option (--num_workers on Dataflow,
        # --parallelism on Flink): troubleshooting.md.
        raise InputError(f"--workers: the local runner's; {runner} counts its workers in --pipeline-options")
    else:
        described = str(runner)
    options = PipelineOptions(args)
    ignored = _unparsed(options)
    if ignored:
        # `python -m apache_beam.examples.wordcount --help` lists them (troubleshooting.md).
        raise InputError(f"--pipeline-options: {' '.join(ignored)}: not an option of Beam's runners")
    return options, described, local


def _unparsed(options: PipelineOptions) -> list:
    """The arguments Beam's option parsers leave unparsed (Beam only logs "Discarding unparseable
    args" and runs without them)."""
    caught = []

    class Catch(logging.Handler):
        def emit(self, record):
            if "unparseable args" in record.getMessage():
                caught.extend(record.args[0] if record.args and isinstance(record.args[0], list) else [])

    logger = logging.getLogger("apache_beam.options.pipeline_options")
    handler, propagate, level = Catch(), logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False  # caught here, not also printed
    logger.setLevel(logging.WARNING)  # whatever `quiet_driver_logs` set on apache_beam
    try:
        options.get_all_options()
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = propagate, level
    return caught


def run(model: str, inputs, out: str, workers: int | None = None, pipeline_options_text: str | None = None,
        force: bool = False, batch_size: int | None = None, labels: str | None = None, min_score: float = 0.0,
        threads: int | None = None, precision: str = "float32", runtime: str | None = None, quiet: bool = False,
        progress=None) -> dict:
    """Runs `predict` as a Beam pipeline; returns predict's summary plus `shards`.

    Args:
      model: a converted directory, a `.tflite` or an `.onnx` file, at a path every worker can read.
      inputs: files, folders and file patterns (`sources`).
      out: the JSON lines' name; the shards are `shard_names(out)` around
        `-SSSSS-of-NNNNN`.
      workers: Beam's local runner's worker processes (default 1).
      pipeline_options_text: more Beam pipeline options, as on a command line.
      batch_size: the largest batch RunInference forms (default 8).
      labels, min_score: as `predict`'s.
      threads: LiteRT's interpreter or ONNX Runtime's threads per worker (a `.tflite` or `.onnx`
        model; default: on the local runner the CPU count over `workers`).
      precision: the TensorFlow runtime's compute precision.
      runtime: an `.onnx` file's runtime (`ssd_mobilenet.formats.onnx.runtimes.RUNTIMES`; None: ONNX Runtime).
    Raises:
      InputError (OutputExistsError): bad input, one line; nothing is written.
      RunError: the pipeline failed; no shard is written.
    """
    from migrate.predict.prediction import model_labels, synthetic_note
    say = progress or (lambda msg: None)
    runtime_name = _runtime_name(model, runtime)
    names = model_labels(model, labels, lambda line: print(line, file=sys.stderr, flush=True))
    options, described, local = pipeline_options(workers, pipeline_options_text)
    found = sources(inputs)
    prefix, suffix = shard_names(out)
    before = _existing_shards(prefix, suffix)
    if before and not force:
        raise OutputExistsError(f"{min(before)}: exists (use --force to replace the shards of {out})")
    batch_size = batch_size or DEFAULT_BATCH
    # Local workers share this machine's cores: each gets its part, as a model file's runtime's
    # threads (LiteRT, ONNX Runtime) and as TensorFlow's intra-op threads (TF_NUM_INTRAOP_THREADS,
    # read when a worker's TensorFlow starts), so that N workers do not each run a pool as wide as
    # the machine.
    cores = max(1, (os.cpu_count() or 1) // local) if local else None
    worker_env = {"TF_NUM_INTRAOP_THREADS": str(cores)} if cores and "TF_NUM_INTRAOP_THREADS" not in os.environ \
        else {}
    # Of these, the options the model's runtime takes (`migrate.predict.runtimes.KINDS`).
    offered = {"threads": threads or cores, "batch_size": batch_size, "precision": precision, "runtime": runtime}
    runtime_options = {name: value for name, value in offered.items() if name in runtime_kind(model).options}
    handler = RuntimeHandler(model, runtime_options, batch_size)
    say(f"{runtime_name} on {described}")
    say(f"{len(found)} source{'s' if len(found) > 1 else ''}, batches of up to "
        f"{batch_size} -> {prefix}-*-of-*{suffix}")

    temp_before = set(_beam_temp_dirs(prefix))
    folder = os.path.dirname(os.path.abspath(prefix))
    folder_existed = _is_url(prefix) or os.path.isdir(folder)
    start = time.perf_counter()
    try:
        pipeline = beam.Pipeline(options=options)
    except ValueError as e:  # e.g. a --runner Beam does not know
        raise InputError(f"--pipeline-options: {_first_line(e)}") from None
    paths = (pipeline | "Sources" >> beam.Create(found)
             | "Match" >> beam.FlatMap(matched_images))
    if len(found) > 1:
        paths = paths | "Once each" >> beam.Distinct()
    _ = (paths
         | "Spread" >> beam.Reshuffle()
         | "Read" >> beam.Map(read)
         | "Detect" >> RunInference(handler)
         | "Lines" >> beam.ParDo(ToLine(names, min_score, quiet))
         | "Write" >> beam.io.WriteToText(prefix, file_name_suffix=suffix))
    try:
        with console.environment(worker_env):  # the local runner's workers start with this environment
            result = pipeline.run()
            result.wait_until_finish()
    except Exception as e:  # noqa: BLE001 - a worker's failure reaches the driver as any exception
        _remove_beam_temp_dirs(prefix, temp_before)
        if not folder_existed and os.path.isdir(folder) and not os.listdir(folder):
            os.rmdir(folder)  # made by the sink for the shards that never came
        raise RunError(f"the pipeline failed: {_worker_error(e)}") from e
    seconds = time.perf_counter() - start
    counters = {}
    for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        # Committed counts where the runner keeps them; some runners report attempted ones only.
        value = (c.committed if c.committed is not None else c.attempted) or 0
        counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + value
    after = _existing_shards(prefix, suffix)
    # An earlier run's shards that this run's did not replace (it wrote fewer): removed.
    stale = [path for path, mtime in before.items() if after.get(path) == mtime]
    if stale:
        FileSystems.delete(stale)
    shards = sorted(path for path in after if path not in stale)
    count = counters.get("images", 0)
    return {"images": count, "failed": counters.get("unreadable", 0), "detections": counters.get("detections", 0),
            "seconds": round(seconds, 3), "images_per_s": round(count / seconds, 2) if seconds else 0.0,
            "batch_size": batch_size, "runtime": f"{runtime_name} on {described}", "out": out, "shards": shards,
            "note": synthetic_note(model)}


def _runtime_name(model: str, runtime: str | None = None) -> str:
    """The runtime for `model`, after the checks that need neither TensorFlow nor a worker, so
    that a bad model gets its line before the pipeline starts.

    Raises:
      InputError: naming the model.
    """
    if os.path.isfile(model):
        from migrate.predict.runtimes import open_runtime
        # Opens and inspects the file: LiteRT, ONNX Runtime or OpenVINO.
        return open_runtime(model, threads=1, **({"runtime": runtime} if runtime else {})).name
    config = converted_dir.config_path(model)
    if not os.path.isfile(config):
        raise InputError(f"{config}: not found (not a converted model directory)")
    return "TensorFlow"


def _beam_temp_dirs(prefix: str) -> list:
    # WriteToText's temporary folder: beam-temp-<name>-<uuid> beside the shards (local outputs).
    return glob.glob(os.path.join(os.path.dirname(os.path.abspath(prefix)),
                                  f"beam-temp-{glob.escape(os.path.basename(prefix))}-*"))


def _remove_beam_temp_dirs(prefix: str, keep) -> None:
    if _is_url(prefix):
        return  # a cluster's storage: its runner's own cleanup
    for path in _beam_temp_dirs(prefix):
        if path not in keep:
            shutil.rmtree(path, ignore_errors=True)


def quiet_driver_logs(verbose: bool):
    """Beam's driver-side log (and the worker log lines it relays) at ERROR unless `verbose`;
    returns a function that puts the level back."""
    logger = logging.getLogger("apache_beam")
    level = logger.level
    if not verbose:
        logger.setLevel(logging.ERROR)
    return lambda: logger.setLevel(level)

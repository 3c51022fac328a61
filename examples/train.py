"""Train a small CNN with Flax on real images read by jaxdali, sharded over 8 devices.

With no arguments it trains on scikit-learn's handwritten digits (1797 real scans shipped with
scikit-learn, written once as PNG class folders into ~/.cache/jaxdali/digits): no download. With
``--data DIR`` it trains on any ImageNet-style folder (one sub-folder of images per class).

What it shows, end to end on any machine (CPU here; GPU/TPU unchanged):
  * a training pipeline (random-crop decode, resize, optional flip, normalise) and a validation
    pipeline (decode, shorter side, centre crop), written with DALI's API, reading *distinct* files:
    every 5th image of each class is held out for validation;
  * ``data_iterator`` with a ``NamedSharding``: one pipeline per device, global batches sharded
    over the mesh, fed to a ``jax.jit`` step; on a CPU-only machine 8 devices are simulated;
  * exact-once evaluation: ``pad_last_batch`` and the ``is_nonpadding`` mask count each
    validation image once;
  * model and loader saved together by one Orbax ``CheckpointManager`` after every epoch;
    ``--resume`` continues the run exactly (same batches, same augmentations) and ``--epochs`` is the
    total number of epochs.

Run:  python examples/train.py [--epochs 5] [--data DIR] [--resume] [--checkpoint-dir DIR]
"""

from __future__ import annotations

import os

if "XLA_FLAGS" not in os.environ:  # must precede the first jax import; a user's own flags win
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from flax import linen as nn  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from tqdm import tqdm  # noqa: E402

from jaxdali import fn, types  # noqa: E402
from jaxdali.datasets import digits  # noqa: E402
from jaxdali.ops.readers.file import list_class_folders  # noqa: E402
from jaxdali.plugin.jax import LastBatchPolicy, data_iterator  # noqa: E402
from jaxdali.plugin.jax.orbax import LoaderRestore, LoaderSave  # noqa: E402

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
RUN_FILE = "run.json"
HOLD_OUT_EVERY = 5  # every 5th image of a class is a validation image


def split(root: str) -> tuple[tuple[list[str], list[int]], tuple[list[str], list[int]], list[str]]:
    """(train files, labels), (validation files, labels) and the class names of a class-folder tree."""
    names, labels = list_class_folders(root)
    paths = [os.path.join(root, n) for n in names]
    held_out = [i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1 for i in range(len(paths))]
    train = ([p for p, h in zip(paths, held_out) if not h], [lab for lab, h in zip(labels, held_out) if not h])
    val = ([p for p, h in zip(paths, held_out) if h], [lab for lab, h in zip(labels, held_out) if h])
    classes = sorted({n.split(os.sep)[0] for n in names})
    return train, val, classes


def make_loaders(train_files, val_files, size: int, flip: bool, mesh: Mesh):
    sharding = NamedSharding(mesh, P("batch"))

    @data_iterator(output_map=["images", "labels"], reader_name="Reader", sharding=sharding,
                   last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
    def train_loader(shard_id, num_shards):
        jpegs, labels = fn.readers.file(files=train_files[0], labels=train_files[1], shard_id=shard_id,
                                        num_shards=num_shards, random_shuffle=True, pad_last_batch=True,
                                        name="Reader")
        images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.5, 1.0],
                                               random_aspect_ratio=[0.8, 1.25], num_attempts=100)
        images = fn.resize(images, resize_x=size, resize_y=size)
        mirror = fn.random.coin_flip(probability=0.5) if flip else 0
        images = fn.crop_mirror_normalize(images.gpu(), dtype=types.FLOAT, output_layout="HWC", mean=MEAN,
                                          std=STD, mirror=mirror)
        return images, labels.gpu()

    @data_iterator(output_map=["images", "labels"], reader_name="Reader", sharding=sharding)
    def val_loader(shard_id, num_shards):
        jpegs, labels = fn.readers.file(files=val_files[0], labels=val_files[1], shard_id=shard_id,
                                        num_shards=num_shards, pad_last_batch=True, name="Reader")
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        images = fn.resize(images, resize_shorter=size + size // 8)
        images = fn.crop_mirror_normalize(images.gpu(), crop=(size, size), dtype=types.FLOAT,
                                          output_layout="HWC", mean=MEAN, std=STD)
        return images, labels.gpu()

    return train_loader, val_loader


class SmallCNN(nn.Module):
    num_classes: int

    @nn.compact
    def __call__(self, x):
        for features in (32, 64, 128):
            x = nn.Conv(features, (3, 3))(x)
            x = nn.relu(x)
            x = nn.max_pool(x, (2, 2), (2, 2))
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes)(x)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="ImageNet-style folder (one sub-folder of images per class); "
                        "default: scikit-learn's handwritten digits, written once to ~/.cache/jaxdali/digits")
    parser.add_argument("--epochs", type=int, default=5, help="total number of epochs, also when resuming")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size (split over the devices)")
    parser.add_argument("--size", type=int, default=None, help="image side (default: 32 for the digits, 64 else)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--checkpoint-dir", default=None,
                        help="where the run's checkpoints go (default: a new jaxdali_runs/<data folder>-<time>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --checkpoint-dir (default: the latest run on the same data)")
    parser.add_argument("--overwrite", action="store_true", help="discard a run already in --checkpoint-dir")
    return parser.parse_args(argv)


def fail(message: str) -> None:
    sys.exit(f"{pathlib.Path(__file__).name}: error: {message}")


def run_directory(checkpoint_dir: str | None, root: str, resume: bool) -> pathlib.Path:
    """The run's checkpoint directory: the given one, else the latest run on this data folder under
    ./jaxdali_runs when resuming, else a new one named after the folder and the time."""
    if checkpoint_dir:
        return pathlib.Path(checkpoint_dir).absolute()
    runs = pathlib.Path("jaxdali_runs").absolute()
    name = os.path.basename(root)
    previous = sorted(runs.glob(f"{name}-????????-??????"))  # the timestamps sort in time order
    if resume and previous:
        return previous[-1]
    return runs / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_run_dir(directory: pathlib.Path, run: dict, args: argparse.Namespace) -> None:
    """Refuses a checkpoint directory that holds another run (unless --overwrite), or a different run
    to --resume; the directory then holds this run's description."""
    run_file = directory / RUN_FILE
    if directory.is_dir() and any(directory.iterdir()):
        saved = json.loads(run_file.read_text()) if run_file.is_file() else None
        if args.overwrite:
            shutil.rmtree(directory)
        elif not args.resume:
            fail(f"checkpoint directory {str(directory)!r} already holds a run: add --resume to continue it, "
                 "--overwrite to discard it, or give another --checkpoint-dir")
        elif saved != run:
            differs = sorted(k for k in run if saved is None or saved.get(k) != run[k])
            fail(f"checkpoint directory {str(directory)!r} holds another run (it differs in {', '.join(differs)}); "
                 "give that run's arguments, another --checkpoint-dir, or --overwrite")
    directory.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps(run, indent=1))


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.data is None:
        root, flip, size = digits(), False, args.size or 32
    else:
        root, flip, size = os.path.abspath(args.data), True, args.size or 64
        if not os.path.isdir(root):
            fail(f"--data {args.data!r} is not a folder. Give a folder with one sub-folder of images per "
                 "class (e.g. ImageNet's train/), or leave --data out to train on scikit-learn's digits")
    train_files, val_files, classes = split(root)
    directory = run_directory(args.checkpoint_dir, root, args.resume)
    check_run_dir(directory, {"data": root, "batch_size": args.batch_size, "size": size, "lr": args.lr}, args)

    devices = jax.devices()
    if args.batch_size % len(devices):
        fail(f"--batch-size {args.batch_size} must be a multiple of the {len(devices)} devices")
    mesh = Mesh(devices, ("batch",))
    replicated = NamedSharding(mesh, P())
    train_loader, val_loader = make_loaders(train_files, val_files, size, flip, mesh)
    threads = os.cpu_count() or 1  # per pipeline; the pipelines of a process share one worker pool
    loader_kwargs = dict(batch_size=args.batch_size, seed=0, enable_checkpointing=True, num_threads=threads)

    model = SmallCNN(num_classes=len(classes))
    tx = optax.adam(args.lr)

    @functools.partial(jax.jit, out_shardings=replicated)  # one compiled program, not one per initialiser
    def init_state(key):
        params = model.init(key, jnp.zeros((1, size, size, 3)))
        return {"params": params, "opt": tx.init(params), "step": jnp.zeros((), jnp.int32)}

    state = init_state(jax.random.key(0))

    @jax.jit
    def train_step(state, images, labels):
        def loss_fn(p):
            logits = model.apply(p, images)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels[:, 0]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, opt = tx.update(grads, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt": opt, "step": state["step"] + 1}, loss

    @jax.jit
    def eval_step(params, images, labels, mask):
        correct = jnp.argmax(model.apply(params, images), -1) == labels[:, 0]
        return jnp.sum(correct & mask), jnp.sum(mask)

    run_start = time.perf_counter()
    options = ocp.CheckpointManagerOptions(max_to_keep=2)
    with ocp.CheckpointManager(directory, options=options) as mngr:
        if args.resume and mngr.latest_step() is not None:
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
            restored = mngr.restore(mngr.latest_step(), args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), loader=LoaderRestore(train_loader, kwargs=loader_kwargs)))
            state, train_it = restored.state, restored.loader
        else:
            if args.resume:
                print(f"nothing to resume in {directory}: starting a new run")
            train_it = train_loader(**loader_kwargs)
        val_it = val_loader(batch_size=args.batch_size, num_threads=threads)
        steps_per_epoch = len(train_it)
        done = int(state["step"]) // steps_per_epoch
        print(f"data: {root} ({len(classes)} classes; {len(train_files[0])} train, {len(val_files[0])} validation "
              f"images); {len(devices)} {devices[0].platform} devices, global batch {args.batch_size}; "
              f"checkpoints: {directory}" + (f"; resumed after epoch {done}" if done else ""))
        if done >= args.epochs:
            print(f"the run already has {done} epochs; ask for more with --epochs")

        for epoch in range(done + 1, args.epochs + 1):
            losses, seen, timed_from = [], 0, None
            bar = tqdm(train_it, total=steps_per_epoch, desc=f"epoch {epoch}/{args.epochs}", unit="batch",
                       leave=False, file=sys.stdout, disable=None)
            for batch in bar:
                state, loss = train_step(state, batch["images"], batch["labels"])
                losses.append(loss)
                if timed_from is None:  # the first step compiles: images/s counts from its end
                    jax.block_until_ready(loss)
                    timed_from = time.perf_counter()
                else:
                    seen += batch["images"].shape[0]
                if len(losses) % 5 == 0:
                    rate = seen / max(time.perf_counter() - timed_from, 1e-9)
                    bar.set_postfix_str(f"loss {float(loss):.3f}, {rate:.0f} images/s")
            jax.block_until_ready(state)
            images_per_s = seen / max(time.perf_counter() - timed_from, 1e-9)
            correct = total = 0
            for batch in val_it:
                c, n = eval_step(state["params"], batch["images"], batch["labels"], val_it.is_nonpadding)
                correct, total = correct + int(c), total + int(n)
            mngr.save(int(state["step"]), args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                                  loader=LoaderSave(train_it)))
            print(f"epoch {epoch}/{args.epochs}: loss {float(np.mean(jax.device_get(losses))):.4f}, "
                  f"val accuracy {correct / total:.3f} ({correct}/{total} images, each counted once), "
                  f"{images_per_s:.0f} train images/s, {time.perf_counter() - run_start:.1f} s elapsed")
        mngr.wait_until_finished()
    print(f"done in {time.perf_counter() - run_start:.1f} s; continue with --resume --epochs N "
          f"--checkpoint-dir {directory}")


if __name__ == "__main__":
    main()

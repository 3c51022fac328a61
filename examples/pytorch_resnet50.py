"""PyTorch training fed by DALI's ResNet-50 pipeline through ``DALIClassificationIterator``.

The loader lines are those of DALI's PyTorch ResNet-50 example with the imports changed
(``nvidia.dali.plugin.pytorch`` -> ``jaxdali.plugin.pytorch``); the pipeline is the one of
``resnet50_pipelines.py``. A small CNN trains for a few epochs on the CPU.

Run: python examples/pytorch_resnet50.py DIR [--epochs 2] [--crop 64] [--batch-size 16]
"""

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet50_pipelines import create_dali_pipeline  # noqa: E402

from jaxdali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy  # noqa: E402


def small_cnn(num_classes: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, num_classes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--crop", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    num_classes = len([d for d in os.scandir(args.data_dir) if d.is_dir()])

    pipe = create_dali_pipeline(batch_size=args.batch_size, num_threads=os.cpu_count(), device_id=0, seed=12,
                                data_dir=args.data_dir, crop=args.crop, size=args.crop * 8 // 7, dali_cpu=True,
                                shard_id=0, num_shards=1, is_training=True)
    pipe.build()
    train_loader = DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                              auto_reset=True)
    model = small_cnn(num_classes)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        start, losses, seen = time.perf_counter(), [], 0
        steps = int(math.ceil(train_loader._size / args.batch_size))  # as DALI's example computes it
        for i, data in enumerate(train_loader):
            input = data[0]["data"]
            target = data[0]["label"].squeeze(-1).long()
            loss = criterion(model(input), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            seen += input.shape[0]
        print(f"epoch {epoch + 1}: {i + 1}/{steps} steps, {seen} images, loss {sum(losses) / len(losses):.4f}, "
              f"{seen / (time.perf_counter() - start):.0f} images/s")
    pipe.close()


if __name__ == "__main__":
    main()

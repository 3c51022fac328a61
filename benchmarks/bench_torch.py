"""PyTorch: ``DataLoader`` over torchvision's ``ImageFolder`` with ``--threads`` worker processes.

Train: ``RandomResizedCrop(224)`` (area [0.08, 1], ratio [3/4, 4/3]), ``RandomHorizontalFlip``,
``ToTensor``, ``Normalize``; val: ``Resize(256)``, ``CenterCrop(224)``, ``ToTensor``,
``Normalize``. Images are decoded by PIL, torchvision's default loader. The sampler spans every
batch the run takes (several passes over a small folder), so the workers never stall at an epoch
end, as they would not on an ImageNet-sized epoch.

Run by ``run.py``: ``TORCH_PYTHON benchmarks/bench_torch.py --pipeline train --data DIR``.
"""

from __future__ import annotations

import time

import harness


def main(argv: list[str] | None = None) -> dict:
    args = harness.parse_args(argv)

    import torch
    import torchvision
    from torch.utils.data import DataLoader, RandomSampler
    from torchvision import datasets, transforms

    imported_at = time.time()
    versions = {"torch": torch.__version__, "torchvision": torchvision.__version__}
    normalize = transforms.Normalize(mean=[m / 255 for m in harness.MEAN_255], std=[s / 255 for s in harness.STD_255])
    if args.pipeline == "train":
        transform = transforms.Compose([
            transforms.RandomResizedCrop(harness.OUTPUT_SIZE, scale=harness.RANDOM_AREA,
                                         ratio=harness.RANDOM_ASPECT_RATIO),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ])
    else:
        transform = transforms.Compose([
            transforms.Resize(harness.VAL_RESIZE_SHORTER),
            transforms.CenterCrop(harness.OUTPUT_SIZE),
            transforms.ToTensor(),
            normalize,
        ])

    def make_loader():
        torch.manual_seed(args.seed)
        dataset = datasets.ImageFolder(args.data, transform=transform)
        # Every batch the run takes, plus the ones the workers prefetch past the end.
        samples = (1 + args.warmup + args.batches + 2 * args.threads + 2) * args.batch_size
        if args.pipeline == "train":
            sampler = RandomSampler(dataset, num_samples=samples)
        else:
            sampler = [i % len(dataset) for i in range(samples)]
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.threads,
                            drop_last=True)
        iterator = iter(loader)
        return lambda: next(iterator)[0]

    return harness.measure(args, imported_at, make_loader, system="torch",
                           mode=f"DataLoader, {args.threads} workers", versions=versions)


if __name__ == "__main__":
    main()

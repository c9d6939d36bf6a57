"""A Horovod ImageNet-style training script (ResNet, DistributedSampler, backward_passes_per_step,
learning-rate warm-up scaled by the ranks, per-batch metric all-reduces, checkpoints and a resume
epoch broadcast from rank 0); the one dtrain-specific line is the import.
  mpirun -np 4 python3 examples/torch/imagenet_resnet.py --train-dir ~/imagenet/train --val-dir ~/imagenet/val
Without --train-dir it trains on a small synthetic set (tiny images), so it runs anywhere. The model is
torchvision's --arch when torchvision is installed, else a small ResNet defined here."""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import dtrain.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch ImageNet example")
parser.add_argument("--train-dir", default=None)
parser.add_argument("--val-dir", default=None)
parser.add_argument("--checkpoint-format", default="./checkpoint-{epoch}.pth.tar")
parser.add_argument("--fp16-allreduce", action="store_true", default=False)
parser.add_argument("--batches-per-allreduce", type=int, default=1,
                    help="local batches per all-reduce (backward_passes_per_step)")
parser.add_argument("--arch", default="resnet50", help="a torchvision model, when torchvision is installed")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--val-batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=90)
parser.add_argument("--base-lr", type=float, default=0.0125)
parser.add_argument("--warmup-epochs", type=float, default=5)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--wd", type=float, default=0.00005)
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--synthetic-samples", type=int, default=256)
parser.add_argument("--image-size", type=int, default=32)
parser.add_argument("--max-loss-ratio", type=float, default=None,
                    help="exit 1 unless the last epoch's training loss is below this fraction of the first's "
                         "(of the epochs this run trains, at least 2). The training loss, not the validation "
                         "one: on a few tiny synthetic images BatchNorm's running statistics, which validation "
                         "uses, lag the weights by far after the few steps of a short run")


class TinyResNet(nn.Module):
    """Two residual stages: what this script trains when torchvision is missing."""

    def __init__(self, classes=10, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.block1 = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                    nn.ReLU(), nn.Conv2d(width, width, 3, padding=1, bias=False),
                                    nn.BatchNorm2d(width))
        self.down = nn.Conv2d(width, 2 * width, 1, stride=2, bias=False)
        self.block2 = nn.Sequential(nn.Conv2d(2 * width, 2 * width, 3, padding=1, bias=False),
                                    nn.BatchNorm2d(2 * width), nn.ReLU())
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(x + self.block1(x))
        x = self.down(x)
        x = F.relu(x + self.block2(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_model(classes):
    try:
        import torchvision.models
        return getattr(torchvision.models, args.arch)(num_classes=classes)
    except ImportError:
        return TinyResNet(classes)


def synthetic(samples, seed, classes=10):
    patterns = torch.randn(classes, 3, args.image_size, args.image_size, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (samples,), generator=g)
    return torch.utils.data.TensorDataset(patterns[labels] + torch.randn(samples, 3, args.image_size,
                                                                         args.image_size, generator=g), labels)


def datasets():
    if args.train_dir is None:
        return synthetic(args.synthetic_samples, 1), synthetic(args.synthetic_samples // 2, 2)
    from torchvision import datasets as tv, transforms
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train = tv.ImageFolder(args.train_dir, transform=transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]))
    val = tv.ImageFolder(args.val_dir, transform=transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize]))
    return train, val


class Metric:
    """A running average over the batches, every batch's value averaged over the ranks."""

    def __init__(self, name):
        self.name = name
        self.sum = torch.tensor(0.)
        self.n = torch.tensor(0.)

    def update(self, val):
        self.sum += hvd.allreduce(val.detach().cpu(), name=self.name)
        self.n += 1

    @property
    def avg(self):
        return self.sum / self.n


def accuracy(output, target):
    pred = output.max(1, keepdim=True)[1]
    return pred.eq(target.view_as(pred)).cpu().float().mean()


def adjust_learning_rate(epoch, batch_idx):
    if epoch < args.warmup_epochs:
        epoch += float(batch_idx + 1) / len(train_loader)
        lr_adj = 1. / hvd.size() * (epoch * (hvd.size() - 1) / args.warmup_epochs + 1)
    elif epoch < 30:
        lr_adj = 1.
    elif epoch < 60:
        lr_adj = 1e-1
    else:
        lr_adj = 1e-2
    for param_group in optimizer.param_groups:
        param_group["lr"] = args.base_lr * hvd.size() * args.batches_per_allreduce * lr_adj


def train(epoch):
    model.train()
    train_sampler.set_epoch(epoch)
    train_loss, train_accuracy = Metric("train_loss"), Metric("train_accuracy")
    for batch_idx, (data, target) in enumerate(train_loader):
        adjust_learning_rate(epoch, batch_idx)
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        # Each local batch is split into batches-per-allreduce sub-batches, gradients accumulated.
        for i in range(0, len(data), args.batch_size):
            data_batch, target_batch = data[i:i + args.batch_size], target[i:i + args.batch_size]
            output = model(data_batch)
            train_accuracy.update(accuracy(output, target_batch))
            loss = F.cross_entropy(output, target_batch)
            train_loss.update(loss)
            loss.div_(math.ceil(float(len(data)) / args.batch_size))
            loss.backward()
        optimizer.step()
    if hvd.rank() == 0:
        print(f"epoch {epoch + 1}: train loss {train_loss.avg.item():.4f}, accuracy {100 * train_accuracy.avg.item():.2f}%")
    return train_loss.avg.item()


def validate(epoch):
    model.eval()
    val_loss, val_accuracy = Metric("val_loss"), Metric("val_accuracy")
    with torch.no_grad():
        for data, target in val_loader:
            if args.cuda:
                data, target = data.cuda(), target.cuda()
            output = model(data)
            val_loss.update(F.cross_entropy(output, target))
            val_accuracy.update(accuracy(output, target))
    if hvd.rank() == 0:
        print(f"epoch {epoch + 1}: val loss {val_loss.avg.item():.4f}, accuracy {100 * val_accuracy.avg.item():.2f}%")


def save_checkpoint(epoch):
    if hvd.rank() == 0:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                   args.checkpoint_format.format(epoch=epoch + 1))


if __name__ == "__main__":
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    allreduce_batch_size = args.batch_size * args.batches_per_allreduce

    hvd.init()
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.set_device(hvd.local_rank())
        torch.cuda.manual_seed(args.seed)
    else:
        torch.set_num_threads(1)

    # The latest checkpoint, if any, on rank 0; every rank resumes from the epoch rank 0 found.
    resume_from_epoch = 0
    for try_epoch in range(args.epochs, 0, -1):
        if os.path.exists(args.checkpoint_format.format(epoch=try_epoch)):
            resume_from_epoch = try_epoch
            break
    resume_from_epoch = hvd.broadcast(torch.tensor(resume_from_epoch), root_rank=0,
                                      name="resume_from_epoch").item()

    train_dataset, val_dataset = datasets()
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, num_replicas=hvd.size(),
                                                                    rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=allreduce_batch_size, sampler=train_sampler)
    val_sampler = torch.utils.data.distributed.DistributedSampler(val_dataset, num_replicas=hvd.size(),
                                                                  rank=hvd.rank())
    val_loader = torch.utils.data.DataLoader(val_dataset, batch_size=args.val_batch_size, sampler=val_sampler)

    model = build_model(10 if args.train_dir is None else len(train_dataset.classes))
    if args.cuda:
        model.cuda()
    optimizer = optim.SGD(model.parameters(), lr=args.base_lr * args.batches_per_allreduce * hvd.size(),
                          momentum=args.momentum, weight_decay=args.wd)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression,
                                         backward_passes_per_step=args.batches_per_allreduce)

    if resume_from_epoch > 0 and hvd.rank() == 0:
        checkpoint = torch.load(args.checkpoint_format.format(epoch=resume_from_epoch))
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    losses = []
    for epoch in range(resume_from_epoch, args.epochs):
        losses.append(train(epoch))
        validate(epoch)
        save_checkpoint(epoch)
    if args.max_loss_ratio is not None:
        if len(losses) < 2:
            raise SystemExit(f"--max-loss-ratio needs 2 or more epochs trained; this run trained {len(losses)}")
        if not losses[-1] < args.max_loss_ratio * losses[0]:
            raise SystemExit(f"training loss {losses[-1]:.4f} in the last epoch is not below --max-loss-ratio "
                             f"{args.max_loss_ratio} times {losses[0]:.4f}, the first epoch's")

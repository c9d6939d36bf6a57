"""A Horovod MNIST-style training script; the one dtrain-specific line is the import.
  mpirun -np 2 python3 examples/torch/mnist.py --epochs 2
Without --data-dir (torchvision's MNIST) it trains on a small synthetic set of 28x28 digits, so it
runs anywhere, CPU or GPU. The synthetic set grows with the number of ranks (--synthetic-samples-per-rank)
so that every rank trains the same number of steps whatever their number: with Horovod's learning
rate scaled by hvd.size() for the hvd.size() times larger global batch, 1, 2 and 4 ranks then train
alike (a fixed set split 4 ways gave 4 times fewer steps at 4 times the rate, which diverged)."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import dtrain.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch MNIST example")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--test-batch-size", type=int, default=256)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--no-cuda", action="store_true", default=False)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--fp16-allreduce", action="store_true", default=False)
parser.add_argument("--use-mixed-precision", action="store_true", default=False)
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
parser.add_argument("--data-dir", default=None, help="torchvision MNIST here; synthetic digits without it")
parser.add_argument("--synthetic-samples-per-rank", type=int, default=512,
                    help="training samples of the synthetic set per rank (the test set has half as many)")
parser.add_argument("--min-accuracy", type=float, default=None, help="exit 1 below this test accuracy")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic_digits(samples, seed):
    """Ten fixed random 28x28 patterns plus noise: learnable in a few epochs."""
    patterns = torch.randn(10, 1, 28, 28, generator=torch.Generator().manual_seed(0))  # one set for train and test
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = patterns[labels] + 0.5 * torch.randn(samples, 1, 28, 28, generator=g)
    return torch.utils.data.TensorDataset(images, labels)


def datasets(args):
    if args.data_dir is None:
        samples = args.synthetic_samples_per_rank * hvd.size()
        return synthetic_digits(samples, 1), synthetic_digits(samples // 2, 2)
    from torchvision import datasets as tv, transforms
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    # Rank 0 downloads first; the others wait at the barrier and find the files.
    if hvd.local_rank() == 0:
        tv.MNIST(args.data_dir, train=True, download=True)
    hvd.barrier()
    return (tv.MNIST(args.data_dir, train=True, download=True, transform=transform),
            tv.MNIST(args.data_dir, train=False, transform=transform))


def train(epoch):
    model.train()
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        if args.use_mixed_precision:
            with torch.cuda.amp.autocast():
                loss = F.nll_loss(model(data), target)
            scaler.scale(loss).backward()
            # The Horovod AMP pattern: average, unscale, then step without a second synchronize.
            optimizer.synchronize()
            scaler.unscale_(optimizer)
            with optimizer.skip_synchronize():
                scaler.step(optimizer)
            scaler.update()
        else:
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
        if batch_idx % 10 == 0 and hvd.rank() == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_sampler)}]\tLoss: {loss.item():.6f}")


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def test():
    model.eval()
    test_loss, test_accuracy = 0.0, 0.0
    with torch.no_grad():
        for data, target in test_loader:
            if args.cuda:
                data, target = data.cuda(), target.cuda()
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.data.max(1, keepdim=True)[1]
            test_accuracy += pred.eq(target.data.view_as(pred)).cpu().float().sum().item()
    test_loss /= len(test_sampler)
    test_accuracy /= len(test_sampler)
    test_loss = metric_average(test_loss, "avg_loss")
    test_accuracy = metric_average(test_accuracy, "avg_accuracy")
    if hvd.rank() == 0:
        print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {100.0 * test_accuracy:.2f}%\n")
    return test_accuracy


if __name__ == "__main__":
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    hvd.init()
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.set_device(hvd.local_rank())
        torch.cuda.manual_seed(args.seed)
    elif args.use_mixed_precision:
        raise ValueError("Mixed precision is only supported with cuda enabled.")
    torch.set_num_threads(1)

    train_dataset, test_dataset = datasets(args)
    train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, num_replicas=hvd.size(),
                                                                    rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, sampler=train_sampler)
    test_sampler = torch.utils.data.distributed.DistributedSampler(test_dataset, num_replicas=hvd.size(),
                                                                   rank=hvd.rank())
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size, sampler=test_sampler)

    model = Net()
    lr_scaler = hvd.size()
    if args.cuda:
        model.cuda()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression, op=hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)
    if args.use_mixed_precision:
        scaler = torch.cuda.amp.GradScaler()

    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        accuracy = test()
    if args.min_accuracy is not None and accuracy < args.min_accuracy:
        raise SystemExit(f"accuracy {accuracy:.3f} is below --min-accuracy {args.min_accuracy}")

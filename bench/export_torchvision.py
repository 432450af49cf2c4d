"""Run on the GPU machine (torch there): `python3 bench/export_torchvision.py` with OUT set.
Made bench/data/torchvision/*.onnx and tests/data/models/tcn_torch_*.

Export torchvision models (random weights, stripped: float initializers keep their dims,
their data is dropped so the files come back small; tests/models.py's randomize_weights refills
them) and the seed's TCN with weight norm kept (dynamic N and T) to $OUT."""
import os, sys, time
import numpy as np
import torch, torchvision, onnx
sys.path.insert(0, "bench")
out = os.environ["OUT"]
torch.manual_seed(0)
for name in ["resnet18", "regnet_y_400mf", "mobilenet_v3_small", "efficientnet_b0", "densenet121"]:
    m = getattr(torchvision.models, name)(weights=None).eval()
    path = f"/tmp/{name}.onnx"
    t = time.time()
    torch.onnx.export(m, (torch.randn(1, 3, 224, 224),), path, opset_version=17, dynamo=False,
                      input_names=["x"], output_names=["y"])
    model = onnx.load(path)
    for init in model.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            init.ClearField("raw_data"); del init.float_data[:]
            init.doc_string = "stripped"
    onnx.save(model, os.path.join(out, f"tv_{name}.onnx"))
    print(name, os.path.getsize(os.path.join(out, f"tv_{name}.onnx")), f"{time.time()-t:.1f}s")
import gpu_peers
from torch.nn.utils.parametrizations import weight_norm
nn = torch.nn
class Chomp1d(nn.Module):
    def __init__(self, size): super().__init__(); self.size = size
    def forward(self, x): return x[:, :, :-self.size].contiguous()
class Block(nn.Module):
    def __init__(self, cin, cout, k, d):
        super().__init__(); pad = (k - 1) * d
        self.conv1 = weight_norm(nn.Conv1d(cin, cout, k, padding=pad, dilation=d))
        self.conv2 = weight_norm(nn.Conv1d(cout, cout, k, padding=pad, dilation=d))
        self.net = nn.Sequential(self.conv1, Chomp1d(pad), nn.ReLU(), nn.Dropout(0.2),
                                 self.conv2, Chomp1d(pad), nn.ReLU(), nn.Dropout(0.2))
        self.downsample = nn.Conv1d(cin, cout, 1) if cin != cout else None
        self.relu = nn.ReLU()
    def forward(self, x):
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(self.net(x) + res)
class TCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.tcn = nn.Sequential(*[Block(1 if i == 0 else 25, 25, 7, 2 ** i) for i in range(8)])
        self.linear = nn.Linear(25, 10)
    def forward(self, x):
        y = self.tcn(x)
        return torch.nn.functional.log_softmax(self.linear(y[:, :, -1]), dim=1)
tcn = TCN().eval()
x = torch.randn(2, 1, 784)
with torch.no_grad():
    y = tcn(x).numpy()
torch.onnx.export(tcn, (x,), os.path.join(out, "tcn_torch_wn.onnx"), opset_version=17,
                  dynamo=False, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "N", 2: "T"}, "y": {0: "N"}})
np.save(os.path.join(out, "tcn_torch_x.npy"), x.numpy()); np.save(os.path.join(out, "tcn_torch_y.npy"), y)
print("tcn", os.path.getsize(os.path.join(out, "tcn_torch_wn.onnx")))

#!/usr/bin/python3
"""keras_survey_check.py: an independent check of the files keras_survey.sh finds loading. Each
Sequential model made of Dense, Activation, Dropout, BatchNormalization, Flatten, Embedding, LSTM,
GRU and SimpleRNN layers is rebuilt in float64 NumPy from the file itself (h5py, zipfile: Keras 2
HDF5 weight_names, Keras 3 layers/<class>[_N]/[cell/]vars, tf.keras 2.14's
_layer_checkpoint_dependencies, tf.keras 2.15-on-Windows "layers\\<name>" groups) and compared with
the library's prediction (its Python package) on random inputs (integer ids for an Embedding).

    scripts/keras_survey_check.py BUILD_DIR FILE...
Prints MATCH/DIFF/FAIL per file (within 1e-5 of the largest output, at least 1e-5) and the counts;
models of other layers are counted as not rebuilt."""
import glob, io, json, sys, zipfile
import h5py, numpy as np
sys.path.insert(0, sys.argv[1] + '/python')
import tarantella as tnt

ACT = {'relu': lambda x: np.maximum(x, 0), 'linear': lambda x: x, None: lambda x: x,
       'sigmoid': lambda x: 1 / (1 + np.exp(-x)), 'tanh': np.tanh,
       'softmax': lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
       'elu': lambda x: np.where(x > 0, x, np.exp(x) - 1), 'softplus': lambda x: np.log1p(np.exp(x)),
       'selu': lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1)),
       'swish': lambda x: x / (1 + np.exp(-x)), 'silu': lambda x: x / (1 + np.exp(-x)),
       'leaky_relu': lambda x: np.where(x > 0, x, 0.2 * x), 'gelu': None}
OK_CLASSES = {'Dense', 'Dropout', 'Activation', 'BatchNormalization', 'Flatten', 'InputLayer', 'LSTM', 'GRU', 'Embedding', 'SimpleRNN', 'SpatialDropout1D', 'GaussianNoise'}
ACT['hard_sigmoid'] = lambda x: np.clip(0.2 * x + 0.5, 0, 1)


def snake(c):
    import re
    c = re.sub(r'\W+', '', c)
    c = re.sub('(.)([A-Z][a-z]+)', r'\1_\2', c)
    return re.sub('([a-z])([A-Z])', r'\1_\2', c).lower()

def layers_and_weights(f):
    if zipfile.is_zipfile(f):
        z = zipfile.ZipFile(f)
        cfg = json.loads(z.read('config.json'))
        h = h5py.File(io.BytesIO(z.read('model.weights.h5')), 'r')
        if cfg['class_name'] != 'Sequential': return None
        layers = cfg['config']['layers']
        counts, out = {}, []
        root = 'layers' if 'layers' in h else '_layer_checkpoint_dependencies' if '_layer_checkpoint_dependencies' in h else None
        for l in layers:
            if l['class_name'] == 'InputLayer': out.append((l, [])); continue
            b = snake(l['class_name']); n = counts.get(b, 0); counts[b] = n + 1
            name = b if n == 0 else f'{b}_{n}'
            for p in (f'{root}/{name}/cell/vars', f'{root}/{name}/vars', f'layers\\{name}/vars'):
                if p in h and len(h[p]): break
            else: p = None
            ws = [h[p][str(i)][()] for i in range(len(h[p]))] if p else []
            out.append((l, ws))
        return out
    h = h5py.File(f, 'r')
    cfg = json.loads(h.attrs['model_config'])
    if cfg['class_name'] != 'Sequential': return None
    layers = cfg['config']['layers'] if isinstance(cfg['config'], dict) else cfg['config']
    mw = h['model_weights']
    out = []
    for l in layers:
        name = l['config']['name']
        g = mw[name] if name in mw else None
        wn = [n.decode() if isinstance(n, bytes) else n for n in g.attrs['weight_names']] if g is not None and 'weight_names' in g.attrs else []
        out.append((l, [g[n][()] for n in wn]))
    return out

def predict(layers, x):
    for l, ws in layers:
        c, cfg = l['class_name'], l['config']
        if c not in OK_CLASSES: raise NotImplementedError(c)
        if c == 'Dense':
            a = cfg.get('activation'); a = a if isinstance(a, str) or a is None else None
            if a not in ACT or ACT[a] is None: raise NotImplementedError('act ' + str(a))
            x = x @ ws[0] + (ws[1] if cfg.get('use_bias', True) else 0)
            x = ACT[a](x)
        elif c == 'Activation':
            a = cfg['activation']
            if a not in ACT or ACT[a] is None: raise NotImplementedError('act ' + a)
            x = ACT[a](x)
        elif c == 'BatchNormalization':
            k = 0
            gamma = ws[k] if cfg.get('scale', True) else 1; k += cfg.get('scale', True)
            beta = ws[k] if cfg.get('center', True) else 0; k += cfg.get('center', True)
            mean, var = ws[k], ws[k + 1]
            x = (x - mean) / np.sqrt(var + cfg.get('epsilon', 1e-3)) * gamma + beta
        elif c == 'Flatten':
            x = x.reshape(x.shape[0], -1)
        elif c == 'Embedding':
            x = ws[0][x.astype(np.int64)]
        elif c in ('LSTM', 'GRU', 'SimpleRNN'):
            if cfg.get('go_backwards') or cfg.get('stateful') or cfg.get('return_state'): raise NotImplementedError(c)
            act = ACT[cfg.get('activation', 'tanh')]
            ract = ACT[cfg.get('recurrent_activation', 'sigmoid' if c != 'SimpleRNN' else 'tanh')]
            k, r = ws[0], ws[1]
            b = ws[2] if cfg.get('use_bias', True) else np.zeros(k.shape[1])
            u = r.shape[0]
            n, T = x.shape[0], x.shape[1]
            h = np.zeros((n, u)); cst = np.zeros((n, u)); outs = []
            for t in range(T):
                xt = x[:, t]
                if c == 'LSTM':
                    z = xt @ k + h @ r + b
                    i, f, g, o = z[:, :u], z[:, u:2*u], z[:, 2*u:3*u], z[:, 3*u:]
                    cst = ract(f) * cst + ract(i) * act(g); h = ract(o) * act(cst)
                elif c == 'SimpleRNN':
                    h = act(xt @ k + h @ r + b)
                else:
                    if cfg.get('reset_after', False):
                        bi, br = (b[0], b[1]) if b.ndim == 2 else (b, np.zeros_like(b))
                        xz = xt @ k + bi; hz = h @ r + br
                        zg = ract(xz[:, :u] + hz[:, :u]); rg = ract(xz[:, u:2*u] + hz[:, u:2*u])
                        hh = act(xz[:, 2*u:] + rg * hz[:, 2*u:])
                    else:
                        xz = xt @ k + b
                        zg = ract(xz[:, :u] + h @ r[:, :u]); rg = ract(xz[:, u:2*u] + h @ r[:, u:2*u])
                        hh = act(xz[:, 2*u:] + (rg * h) @ r[:, 2*u:])
                    h = zg * h + (1 - zg) * hh
                outs.append(h)
            x = np.stack(outs, 1) if cfg.get('return_sequences') else h
    return x

def input_dim(layers):
    for l, ws in layers:
        cfg = l['config']
        for k in ('batch_input_shape', 'batch_shape'):
            if cfg.get(k): return cfg[k][1:]
        if l['class_name'] == 'Embedding' and cfg.get('input_length'): return [cfg['input_length']]
        if l['class_name'] == 'Dense' and ws: return [ws[0].shape[0]]
    return None

ok = bad = skipped = 0
for f in sys.argv[2:]:
    try:
        layers = layers_and_weights(f)
        if layers is None: skipped += 1; continue
        dims = input_dim(layers)
        if not dims: skipped += 1; continue
        emb = [l for l, _ in layers if l['class_name'] != 'InputLayer'][0]['class_name'] == 'Embedding'
        if any(d is None for d in dims) and not emb: skipped += 1; continue
        first = [l for l, _ in layers if l['class_name'] != 'InputLayer'][0]
        if first['class_name'] == 'Embedding':
            dims = [d if d is not None else 8 for d in dims]
            x = np.random.default_rng(0).integers(0, first['config']['input_dim'], [4] + dims).astype(np.float32)
        else:
            x = np.random.default_rng(0).uniform(-1, 1, [4] + dims).astype(np.float32)
        want = predict(layers, x.astype(np.float64))
    except NotImplementedError:
        skipped += 1; continue
    except Exception as e:
        print('REBUILD-ERROR', f, type(e).__name__, e); skipped += 1; continue
    try:
        m = tnt.keras.models.load_model(f, compile=False)
        got = m.predict(x, verbose=0)
        err = float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max())
        scale = max(1.0, float(np.abs(want).max()))
        if err <= 1e-5 * scale: ok += 1; print('MATCH', f, err)
        else: bad += 1; print('DIFF', f, err)
    except Exception as e:
        bad += 1; print('FAIL', f, e)
print(f'{ok} match, {bad} differ or fail, {skipped} not rebuildable here')

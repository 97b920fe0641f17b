"""The corpus: where each program comes from (repository, commit, path, licence), its group, and the
edits beyond the import lines that make it run in seconds on synthetic data, each with its reason.

group "main": programs that use the Keras surface of issue 21 (models, layers, callbacks, utils,
preprocessing, datasets, saving). group "custom_code": programs that define their own layers,
models, losses or metrics in tensor code (Lambda, Layer/Model subclasses, keras.ops, K.* math,
GradientTape): issue 22's; registered and run like the others, expected to fail until then.

An edit is (old, new, why[, count]): the exact text `old` must occur `count` times (default 1).
"files" names local data files a program opens by path (synthetic_data.LOCAL), relative to its
working folder. "prints" names figures the program prints: (label, "finite" | "prob").
"""

SOURCES = {
    "keras2": {"repo": "keras-team/keras", "commit": "1a3ee8441933fc007be6b2beb47af67998d50737",
               "licence": "MIT", "what": "Keras 2.4's examples/ (June 2020, the last commit before their removal)"},
    "kerasio": {"repo": "keras-team/keras", "commit": "2588a15440a10de8d0cc10b50c21ede333a2bd01",
                "licence": "Apache-2.0",
                "what": "keras.io examples as ported in keras-team/keras examples/keras_io (January 2024)"},
    "guides": {"repo": "keras-team/keras", "commit": "3422977a5e38fb2f7709aaa9a08e47f0c43d0f60",
               "licence": "Apache-2.0", "what": "the keras.io developer guides in keras-team/keras guides/"},
    "dlwp": {"repo": "fchollet/deep-learning-with-python-notebooks",
             "commit": "dea84a4e12cc3bb3cb61ce952a0168bca113d315", "licence": "MIT",
             "what": "Deep Learning with Python notebooks (first edition, Keras 2); code cells in order"},
}

# The held-out group: training scripts of ordinary users' repositories, chosen after the corpus above
# was made to run and never tuned for (README: "The held-out group"). One source per repository.
HELDOUT_SOURCES = {
    "ho_sn": ("269460/SN", "cdebcbe41197f3f0927d1f4b4ae405c5563d7c0c", "none given"),
    "ho_stockbot": ("Luisalvero/StockBot", "bc6e2e18af83ea7a5ea5e5472674422f3a56c14d", "Apache-2.0"),
    "ho_mario": ("98mprice/mario-level-generator", "732857cad43855975c68d51e488c3c361c84590a", "none given"),
    "ho_ajioz": ("Ajioz/autoencoder_models", "2513ed971002bd68ce2f6e0794fac1c3224c4b0e", "none given"),
    "ho_fraud": ("0xDaksh/Credit-Card-Fraud", "501f4319ac0af31665c1fc6e8e321f7bbc874436", "MIT"),
    "ho_hitsong": ("Alex-Elias/hit-song", "7722f18dc4d73b4264006c8054294ef04de95879", "none given"),
    "ho_wyckoff": ("28Zavi/Wyckoff-accumulation-model-train-and-test", "5f38f235fe7ac4d06da0df15b88911c11c4c6e48",
                   "none given"),
    "ho_translation": ("AmalAlmenhali/translation", "318c84f9c3f198fe87e4e809b6137f58b5c4e617", "none given"),
    "ho_energy": ("Alexb715/Electricity_predictor", "a146184109b9b5455b2ddab5e92bf7dfd12491a8", "none given"),
    "ho_fashion": ("AFrozenMushroom/Basic-image-classification", "9124bc067a4dc040d0bd796c7b8affe26212b1d0",
                   "none given"),
    "ho_disaster": ("Aditesh99/Disaster-Predicting-Model", "a26bd4a381c2fc0cd10ba28fb95bd231e8f9225c", "none given"),
    "ho_crop": ("Abid2k/Crop-yield", "3fd65929848434f883c2d598be509c75b85d8615", "none given"),
    "ho_pima": ("therodsouza/ML", "c10cd752d8c0ebe1a4a97ffac97c2d9c89a2a027", "none given"),
    "ho_textclf": ("AFrozenMushroom/Text-classification", "0790a73506a726c7ee41ce47fd22b1e4aae0b201", "none given"),
    "ho_churn": ("404error-010/ANN-Churn-Classification", "05bc5bb32ab0c720b3a54e8bca38b8297e17b852", "GPL-3.0"),
    "ho_series": ("AlainSG/SeriesTemporales", "f1f3291242582dec23f2976458f0cfb60b46b056", "none given"),
    "ho_intents": ("Amogh1221/chatbot-Intend-Based", "30037ce49458cbeb7d87b87af3fc00cb9e7a98e3", "none given"),
    "ho_katakana": ("15louafi/EnglishToKatakanaSeq2Seq", "232003111c354f20d23c410be117653e884c3ab3", "none given"),
    "ho_bank": ("2WelcomeHome1/BANK_UMP_LSTM_Model", "33a904ace939ad2e24a28b2647e6e115bcb454f9", "none given"),
    "ho_amazon": ("AdjoaPanyin/Stock_Price_RNN", "f72f631a0dba8f80d9373e74e6187203e371be83", "none given"),
    "ho_windowed": ("AYMNrh/Stock_Prediction_LSTM", "db0c17818c4bb99544b1fbfbc8d2428ff43bd2ab", "none given"),
    "ho_house": ("108360150-Qiuchonghao/MachineLearning_Houseprice", "52dcd3bd1f810b159e61ac412abe78eadec4f536",
                 "none given"),
    "ho_flownet": ("2mdtln/FlowNet-ANN", "1ea4b5b329d9526b6391c95f059f3b27f3aa24a2", "MIT"),
    "ho_admission": ("ANINDASAU/graduate-admission-prediction", "88923bdec69002aa3d7b1c93bac8041a627433bc", "none given"),
    "ho_bitcoin": ("Ahmad-Zaman-Khan/Bitcoin-Price-Prediction", "1a9aafa9dddc8b67268f0dc1f9272b74139ef38d", "none given"),
}
for _key, (_repo, _commit, _licence) in HELDOUT_SOURCES.items():
    SOURCES[_key] = {"repo": _repo, "commit": _commit, "licence": _licence,
                     "what": "held-out: an ordinary user's training script"}

EPOCHS = "fewer epochs (seconds on 2 cores)"
SMALL = "fewer samples/steps (seconds on 2 cores)"
NUMPY = "NumPy 1.24 removed the alias np.bool/np.float (not a Keras matter)"
ILLUSTRATION = "a cell of the notebook that illustrates, not code that runs (undefined names in any Keras)"
PY37 = "Python 3.7 made re.split return None for an empty optional group (not a Keras matter)"
# Programs written for an older Keras than the 2.11 that Tarantella follows: what Keras itself renamed
# or removed since, changed as its release notes say (the same program fails on Keras 2.11)
KERAS23_KEYS = "Keras 2.3 logs metrics under the name given ('accuracy', 'mae'), no longer 'acc'/'mean_absolute_error'"
KERAS26_PREDICT_CLASSES = "Keras 2.6 removed predict_classes; its deprecation message's replacement, argmax of predict"
KERAS23_PREDICT_LENGTHS = ("Keras 2.3 refuses predict on inputs of different sample counts ('Data cardinality is "
                           "ambiguous'); Keras 2.2's predict read the first input's count, which the program relies on")
KERAS24_CAPTURE = ("Keras 2.4 (TF 2.4's KerasTensors) refuses a layer's call that reads model tensors it was not "
                   "given ('an intermediate Keras symbolic input/output', bnsreenu/python_for_microscopists#32, the "
                   "tutorial this script comes from); the fix given there: pass z_mu and z_sigma as inputs")
DOWNLOAD = "a download that is not a Keras cache file replaced by a local file of the same format"
IMAGENET_WEIGHTS = ("ImageNet weights are a Keras cache file of 548 MB (vgg19_weights_tf_dim_ordering_tf_kernels.h5 "
                    "in ~/.keras/models, which weights='imagenet' reads when present); the program only looks at "
                    "the activations' graph, so random weights")

HARDCODED_PATH = "a hard-coded absolute path (the author's machine) replaced by the working folder's file"
NOTEBOOK_STATE = ("the notebook uses a name (sns) it never imports: its author's kernel had it from an earlier "
                  "session (undefined in any Keras)")
MNIST512 = "the synthetic MNIST has 512 training samples (Keras's has 60000): an index below 512"

CIFAR_CUT = ("(x_train, y_train), (x_test, y_test) = cifar10.load_data()",
             "(x_train, y_train), (x_test, y_test) = cifar10.load_data()\n"
             "x_train, y_train, x_test, y_test = x_train[:256], y_train[:256], x_test[:64], y_test[:64]",
             "fewer samples (CIFAR-10's loader gives the full 50000; the program uses the first 256)")


def _k2(name, category, edits=(), **kw):
    return dict(name=name, source="keras2", path=f"examples/{name}.py", category=category, edits=list(edits),
                group=kw.pop("group", "main"), **kw)


def _io(name, path, category, edits=(), **kw):
    return dict(name=name, source="kerasio", path=f"examples/keras_io/{path}.py", category=category,
                edits=list(edits), group=kw.pop("group", "main"), **kw)


def _nb(name, path, category, edits=(), **kw):
    return dict(name=name, source="dlwp", path=f"first_edition/{path}.ipynb", category=category,
                edits=list(edits), group=kw.pop("group", "main"), **kw)


def _nb2(name, path, category, edits=(), **kw):
    return dict(name=name, source="dlwp", path=f"second_edition/{path}.ipynb", category=category,
                edits=list(edits), group=kw.pop("group", "main"), **kw)


def _guide(name, category, edits=(), **kw):
    return dict(name=name, source="guides", path=f"guides/{name}.py", category=category, edits=list(edits),
                group=kw.pop("group", "main"), **kw)


def _ho(name, source, path, category, edits=(), **kw):
    return dict(name=name, source=source, path=path, category=category, edits=list(edits), group="heldout", **kw)


PROGRAMS = [
    # ---- Keras 2 examples (keras-team/keras, MIT) ----
    _k2("addition_rnn", "RNN seq2seq (RepeatVector, TimeDistributed)",
        [("TRAINING_SIZE = 50000", "TRAINING_SIZE = 2000", SMALL), ("for iteration in range(1, 200):",
                                                                     "for iteration in range(1, 3):", EPOCHS),
         ("dtype=np.bool)", "dtype=bool)", NUMPY, 2),
         ("preds = model.predict_classes(rowx, verbose=0)", "preds = np.argmax(model.predict(rowx, verbose=0), axis=-1)",
          KERAS26_PREDICT_CLASSES)],
        # categorical cross-entropy per time step over 12 characters: ln 12 = 2.48 for a fresh model
        first_epoch_max={"loss": 3.5}),
    _k2("babi_memnn", "functional multi-input, dot/add/concatenate, Permute",
        [("epochs=120", "epochs=2", EPOCHS), ("re.split(r'(\\W+)?', sent)", "re.split(r'(\\W+)', sent)", PY37)]),
    _k2("babi_rnn", "functional multi-input RNN (recurrent module)",
        [("EPOCHS = 20", "EPOCHS = 2", EPOCHS)]),
    _k2("cifar10_cnn", "CNN, ImageDataGenerator, save model",
        [("epochs = 100", "epochs = 2", EPOCHS), CIFAR_CUT], prints=[("Test loss", "finite"), ("Test accuracy", "prob")]),
    _k2("cifar10_resnet", "ResNet (functional), callbacks: ModelCheckpoint, LearningRateScheduler, ReduceLROnPlateau",
        [("epochs = 200", "epochs = 2", EPOCHS), CIFAR_CUT],
        prints=[("Test loss", "finite"), ("Test accuracy", "prob")]),
    _k2("cnn_seq2seq", "Conv1D seq2seq with Dot attention, text file",
        [("epochs = 100", "epochs = 2", EPOCHS), ("nb_examples = 100", "nb_examples = 3", SMALL),
         ("in_decoder = np.zeros(\n    (len(input_texts),", "in_decoder = np.zeros(\n    (nb_examples,",
          KERAS23_PREDICT_LENGTHS)],
        files={"fra-eng/fra.txt": "fra.txt-2017"}),  # the file's two-column form of its time
    _k2("conv_lstm", "ConvLSTM2D + Conv3D on generated movies",
        [("generate_movies(n_samples=1200)", "generate_movies(n_samples=12)", SMALL),
         ("seq.fit(noisy_movies[:1000], shifted_movies[:1000], batch_size=10,\n        epochs=300,",
          "seq.fit(noisy_movies[:10], shifted_movies[:10], batch_size=10,\n        epochs=1,", EPOCHS + "; " + SMALL),
         ("which = 1004", "which = 11", SMALL), ("dtype=np.float)", "dtype=float)", NUMPY, 2)]),
    _k2("imdb_bidirectional_lstm", "text, Bidirectional LSTM", [("epochs=4", "epochs=1", EPOCHS)]),
    _k2("imdb_cnn", "text, Conv1D", prints=[]),
    _k2("imdb_cnn_lstm", "text, Conv1D + LSTM", prints=[("Test score", "finite"), ("Test accuracy", "prob")]),
    _k2("imdb_fasttext", "text, bigram features, GlobalAveragePooling1D", [("epochs = 5", "epochs = 1", EPOCHS)]),
    _k2("imdb_lstm", "text, LSTM", [("epochs=15", "epochs=1", EPOCHS)],
        prints=[("Test score", "finite"), ("Test accuracy", "prob")]),
    _k2("lstm_seq2seq", "functional encoder-decoder LSTM (return_state, initial_state), save",
        [("epochs = 100", "epochs = 2", EPOCHS), ("for seq_index in range(100):", "for seq_index in range(3):",
                                                  SMALL)], files={"fra-eng/fra.txt": "fra.txt"}),
    _k2("lstm_stateful", "stateful LSTM, batch_input_shape, reset_states, pandas",
        [("epochs = 10", "epochs = 1", EPOCHS), ("def gen_uniform_amp(amp=1, xn=10000):",
                                                 "def gen_uniform_amp(amp=1, xn=200):", SMALL)]),
    _k2("lstm_text_generation", "char LSTM, LambdaCallback with predict, get_file",
        [("epochs=60", "epochs=1", EPOCHS), ("for i in range(400):", "for i in range(10):", SMALL),
         ("dtype=np.bool)", "dtype=bool)", NUMPY, 2)]),
    _k2("mnist_acgan", "GAN: train_on_batch, multi-output losses, Embedding/multiply, Progbar",
        [("epochs = 100", "epochs = 1", EPOCHS),
         ("    num_train, num_test = x_train.shape[0], x_test.shape[0]",
          "    x_test, y_test = x_test[:200], y_test[:200]\n    num_train, num_test = x_train.shape[0], x_test.shape[0]",
          SMALL)]),
    _k2("mnist_cnn", "CNN", [("epochs = 12", "epochs = 1", EPOCHS)],
        prints=[("Test loss", "finite"), ("Test accuracy", "prob")]),
    _k2("mnist_denoising_autoencoder", "conv autoencoder, Conv2DTranspose, K.int_shape",
        [("epochs=30", "epochs=1", EPOCHS)]),
    _k2("mnist_hierarchical_rnn", "TimeDistributed(LSTM)",
        [("epochs = 5", "epochs = 1", EPOCHS),
         ("(x_train, y_train), (x_test, y_test) = mnist.load_data()\n",
          "(x_train, y_train), (x_test, y_test) = mnist.load_data()\n"
          "x_train, y_train, x_test, y_test = x_train[:128], y_train[:128], x_test[:128], y_test[:128]\n", SMALL)],
        prints=[("Test loss", "finite"), ("Test accuracy", "prob")]),
    _k2("mnist_irnn", "SimpleRNN with identity/normal initializers",
        [("epochs = 200", "epochs = 1", EPOCHS),
         ("(x_train, y_train), (x_test, y_test) = mnist.load_data()\n",
          "(x_train, y_train), (x_test, y_test) = mnist.load_data()\n"
          "x_train, y_train, x_test, y_test = x_train[:64], y_train[:64], x_test[:64], y_test[:64]\n",
          "fewer samples (784 steps per sample)")],
        prints=[("IRNN test score", "finite"), ("IRNN test accuracy", "prob")]),
    _k2("mnist_mlp", "MLP, RMSprop", [("epochs = 20", "epochs = 1", EPOCHS),
                                      ("x_train.reshape(60000, 784)", "x_train.reshape(512, 784)", SMALL),
                                      ("x_test.reshape(10000, 784)", "x_test.reshape(1000, 784)", SMALL)],
        prints=[("Test loss", "finite"), ("Test accuracy", "prob")]),
    _k2("mnist_net2net", "get_weights/set_weights between models (Net2Net)", [("epochs = 3", "epochs = 1", EPOCHS)]),
    _k2("mnist_transfer_cnn", "transfer learning, trainable=False", [("epochs = 5", "epochs = 1", EPOCHS)],
        prints=[("Test score", "finite"), ("Test accuracy", "prob")]),
    _k2("reuters_mlp", "text, Tokenizer.sequences_to_matrix, MLP", [("epochs = 5", "epochs = 1", EPOCHS)],
        prints=[("Test score", "finite"), ("Test accuracy", "prob")]),
    _k2("reuters_mlp_relu_vs_selu", "SELU + AlphaDropout vs ReLU, history plots",
        [("epochs = 40", "epochs = 1", EPOCHS)]),

    # ---- keras.io examples (Apache-2.0), Keras 3 versions ----
    _io("io_addition_rnn", "nlp/addition_rnn", "RNN seq2seq",
        [("TRAINING_SIZE = 50000", "TRAINING_SIZE = 2000", SMALL), ("epochs = 30", "epochs = 2", EPOCHS)],
        first_epoch_max={"loss": 3.5}),  # as addition_rnn
    _io("io_bidirectional_lstm_imdb", "nlp/bidirectional_lstm_imdb", "text, stacked Bidirectional LSTM",
        [("epochs=2", "epochs=1", EPOCHS)]),
    _io("io_lstm_seq2seq", "nlp/lstm_seq2seq", "encoder-decoder LSTM, get_file(extract), save/load .keras",
        [("epochs = 100", "epochs = 2", EPOCHS), ("for seq_index in range(20):", "for seq_index in range(3):",
                                                  SMALL)]),
    _io("io_timeseries_anomaly_detection", "timeseries/timeseries_anomaly_detection",
        "time series, Conv1DTranspose autoencoder, EarlyStopping, pandas",
        [("df_small_noise_url, parse_dates", "'art_daily_small_noise.csv', parse_dates", DOWNLOAD),
         ("df_daily_jumpsup_url, parse_dates", "'art_daily_jumpsup.csv', parse_dates", DOWNLOAD),
         ("epochs=50", "epochs=2", EPOCHS)],
        files={"art_daily_small_noise.csv": "nab_small_noise", "art_daily_jumpsup.csv": "nab_jumpsup"}),
    _io("io_timeseries_classification", "timeseries/timeseries_classification_from_scratch",
        "time series, Conv1D + BatchNormalization, callbacks, load_model",
        [('readucr(root_url + "FordA_TRAIN.tsv")', 'readucr("FordA_TRAIN.tsv")', DOWNLOAD),
         ('readucr(root_url + "FordA_TEST.tsv")', 'readucr("FordA_TEST.tsv")', DOWNLOAD),
         ("epochs = 500", "epochs = 2", EPOCHS)],
        files={"FordA_TRAIN.tsv": "forda_train", "FordA_TEST.tsv": "forda_test"},
        prints=[("Test accuracy", "prob"), ("Test loss", "finite")]),
    _io("io_timeseries_weather", "timeseries/timeseries_weather_forecasting",
        "time series, timeseries_dataset_from_array, LSTM, ModelCheckpoint/EarlyStopping, pandas",
        [("epochs = 10", "epochs = 1", EPOCHS)]),
    _io("io_autoencoder", "vision/autoencoder", "conv autoencoder (functional), denoising",
        [("epochs=50", "epochs=1", EPOCHS), ("epochs=100", "epochs=1", EPOCHS)]),
    _io("io_mnist_convnet", "vision/mnist_convnet", "CNN", [("epochs = 15", "epochs = 1", EPOCHS)],
        prints=[("Test loss", "finite"), ("Test accuracy", "prob")]),
    _io("io_imbalanced_classification", "tensorflow/structured_data/imbalanced_classification",
        "class_weight, FalseNegatives/FalsePositives/TrueNegatives/TruePositives/Precision/Recall, callbacks",
        [('fname = "/Users/fchollet/Downloads/creditcard.csv"', 'fname = "creditcard.csv"', DOWNLOAD),
         ("epochs=30", "epochs=2", EPOCHS)], files={"creditcard.csv": "creditcard"}),
    _io("io_char_text_generation", "tensorflow/generative/lstm_character_level_text_generation",
        "char LSTM text generation, get_file", [("epochs = 40", "epochs = 1", EPOCHS),
                                                ("for i in range(400):", "for i in range(10):", SMALL)]),

    # ---- Deep Learning with Python, first edition (MIT) ----
    _nb("dlwp_2_1_mnist", "2.1-a-first-look-at-a-neural-network", "MLP on MNIST, to_categorical",
        [("train_images.reshape((60000, 28 * 28))", "train_images.reshape((512, 28 * 28))", SMALL),
         ("test_images.reshape((10000, 28 * 28))", "test_images.reshape((1000, 28 * 28))", SMALL),
         ("epochs=5", "epochs=1", EPOCHS)], prints=[("test_acc", "prob")]),
    _nb("dlwp_3_5_imdb", "3.5-classifying-movie-reviews", "binary classification, optimizers/losses/metrics objects",
        [("x_train[:10000]", "x_train[:100]", SMALL), ("x_train[10000:]", "x_train[100:]", SMALL),
         ("y_train[:10000]", "y_train[:100]", SMALL), ("y_train[10000:]", "y_train[100:]", SMALL),
         ("epochs=20", "epochs=2", EPOCHS), ("epochs=4", "epochs=1", EPOCHS),
         ("history.history['acc']", "history.history['binary_accuracy']", "the key Keras logs for "
          "metrics=[metrics.binary_accuracy] (the notebook reads 'acc', which no Keras 2.3+ logs for it)"),
         ("history.history['val_acc']", "history.history['val_binary_accuracy']", "as the line above"),
         ("history_dict['acc']", "history_dict['binary_accuracy']", "as the line above"),
         ("history_dict['val_acc']", "history_dict['val_binary_accuracy']", "as the line above")]),
    _nb("dlwp_3_6_reuters", "3.6-classifying-newswires", "multiclass, to_categorical, history",
        [("x_train[:1000]", "x_train[:100]", SMALL), ("x_train[1000:]", "x_train[100:]", SMALL),
         ("one_hot_train_labels[:1000]", "one_hot_train_labels[:100]", SMALL),
         ("one_hot_train_labels[1000:]", "one_hot_train_labels[100:]", SMALL),
         ("epochs=20", "epochs=2", EPOCHS, 2), ("epochs=8", "epochs=1", EPOCHS),
         ("history.history['acc']", "history.history['accuracy']", KERAS23_KEYS),
         ("history.history['val_acc']", "history.history['val_accuracy']", KERAS23_KEYS)]),
    _nb("dlwp_3_7_boston", "3.7-predicting-house-prices", "regression, k-fold, mae history, clear_session",
        [("num_epochs = 100", "num_epochs = 2", EPOCHS), ("num_epochs = 500", "num_epochs = 2", EPOCHS),
         ("average_mae_history[10:]", "average_mae_history[1:]", EPOCHS), ("epochs=80", "epochs=2", EPOCHS),
         ("history.history['val_mean_absolute_error']", "history.history['val_mae']", KERAS23_KEYS)]),
    _nb("dlwp_4_4_overfitting", "4.4-overfitting-and-underfitting", "regularizers l1/l2, Dropout, history",
        [("epochs=20", "epochs=2", EPOCHS, 5), ("epochs = range(1, 21)", "epochs = range(1, 3)", EPOCHS),
         ("layer_output *= np.randint(", "# layer_output *= np.randint(", ILLUSTRATION, 2),
         ("layer_output *= 0.5", "# layer_output *= 0.5", ILLUSTRATION),
         ("layer_output /= 0.5", "# layer_output /= 0.5", ILLUSTRATION),
         ("\nmodel.add(layers.Dropout(0.5))", "\n# model.add(layers.Dropout(0.5))", ILLUSTRATION)]),
    _nb("dlwp_5_1_convnet", "5.1-introduction-to-convnets", "CNN",
        [("train_images.reshape((60000, 28, 28, 1))", "train_images.reshape((512, 28, 28, 1))", SMALL),
         ("test_images.reshape((10000, 28, 28, 1))", "test_images.reshape((1000, 28, 28, 1))", SMALL),
         ("epochs=5", "epochs=1", EPOCHS)]),
    _nb("dlwp_6_2_rnn", "6.2-understanding-recurrent-neural-networks", "SimpleRNN/LSTM on IMDB, Embedding",
        [("epochs=10", "epochs=1", EPOCHS, 2)]),
    _nb("dlwp_8_5_gan", "8.5-introduction-to-gans", "GAN: train_on_batch, LeakyReLU, Conv2DTranspose, "
        "RMSprop(lr, clipvalue, decay), save_weights, image.array_to_img",
        [("iterations = 10000", "iterations = 2", EPOCHS), ("batch_size = 20", "batch_size = 4", SMALL),
         ("(x_train, y_train), (_, _) = keras.datasets.cifar10.load_data()",
          "(x_train, y_train), (_, _) = keras.datasets.cifar10.load_data()\nx_train, y_train = x_train[:2560], y_train[:2560]",
          CIFAR_CUT[2].replace("256", "2560")), ("save_dir = '/home/ubuntu/gan_images/'",
                                                          "save_dir = 'gan_images/'", "a writable folder")],
        files={"gan_images/.keep": "keep"}),
    _nb("dlwp_8_1_text_generation", "8.1-text-generation-with-lstm", "char LSTM text generation, get_file, sampling",
        [("for epoch in range(1, 60):", "for epoch in range(1, 2):", EPOCHS),
         ("dtype=np.bool)", "dtype=bool)", NUMPY, 2),
         ("for i in range(400):", "for i in range(10):", SMALL)]),
    # second edition (TensorFlow 2 imports: from tensorflow import keras)
    _nb2("dlwp2_ch04_classification", "chapter04_getting-started-with-neural-networks",
         "IMDB, Reuters, Boston: binary, multiclass, regression; k-fold",
         [("x_train[:10000]", "x_train[:100]", SMALL), ("x_train[10000:]", "x_train[100:]", SMALL),
          ("y_train[:10000]", "y_train[:100]", SMALL), ("y_train[10000:]", "y_train[100:]", SMALL),
          ("x_train[:1000]", "x_train[:100]", SMALL), ("x_train[1000:]", "x_train[100:]", SMALL),
          ("y_train[:1000]", "y_train[:100]", SMALL), ("y_train[1000:]", "y_train[100:]", SMALL),
          ("epochs=20", "epochs=2", EPOCHS, 3), ("epochs=4", "epochs=1", EPOCHS), ("epochs=9", "epochs=1", EPOCHS),
          ("num_epochs = 100", "num_epochs = 2", EPOCHS), ("num_epochs = 500", "num_epochs = 12", EPOCHS),
          ("epochs=130", "epochs=2", EPOCHS)]),
    _nb2("dlwp2_ch05_fundamentals", "chapter05_fundamentals-of-ml",
         "MNIST with noise channels, underfitting/overfitting, regularizers, Dropout, validation_split",
         [("train_images.reshape((60000, 28 * 28))", "train_images.reshape((512, 28 * 28))", SMALL, 3),
          ("epochs=100", "epochs=1", EPOCHS), ("epochs=10", "epochs=1", EPOCHS, 4),
          ("epochs = range(1, 11)", "epochs = range(1, 2)", EPOCHS), ("epochs=20", "epochs=1", EPOCHS, 7),
          ("epochs = range(1, 21)", "epochs = range(1, 2)", EPOCHS)]),
    _nb2("dlwp2_ch07_working_with_keras", "chapter07_working-with-keras",
         "functional multi-input/multi-output, subclassed models, custom metric, callbacks, GradientTape loops",
         [("images.reshape((60000, 28 * 28))", "images.reshape((512, 28 * 28))", SMALL),
          ("test_images.reshape((10000, 28 * 28))", "test_images.reshape((1000, 28 * 28))", SMALL),
          ("images[10000:], images[:10000]", "images[100:], images[:100]", SMALL),
          ("labels[10000:], labels[:10000]", "labels[100:], labels[:100]", SMALL)], group="custom_code"),

    # ---- keras.io guides (Apache-2.0) ----
    _guide("writing_your_own_callbacks", "every callback hook, logs, early stopping, LR schedule, stop_training"),

    # ---- custom code: issue 22's (expected to fail until then) ----
    _k2("antirectifier", "custom Layer subclass (K.* math)",
        [("epochs = 40", "epochs = 1", EPOCHS), ("x_train.reshape(60000, 784)", "x_train.reshape(512, 784)", SMALL),
         ("x_test.reshape(10000, 784)", "x_test.reshape(1000, 784)", SMALL)],
        group="custom_code"),
    _k2("mnist_siamese", "Lambda distance, custom loss and metric", [("epochs = 20", "epochs = 1", EPOCHS)],
        group="custom_code"),
    _k2("variational_autoencoder", "Lambda sampling, add_loss", [("epochs = 50", "epochs = 1", EPOCHS)],
        group="custom_code"),
    _k2("mnist_swwae", "K.gradients in a Lambda", [("epochs = 5", "epochs = 1", EPOCHS)], group="custom_code"),
    _io("io_knowledge_distillation", "vision/knowledge_distillation", "Model subclass with compute_loss (a frozen teacher)",
        [("epochs=3", "epochs=1", EPOCHS, 2), ("epochs=5", "epochs=1", EPOCHS)], group="custom_code"),
    _io("io_mlp_image_classification", "vision/mlp_image_classification", "custom layers (MLP-Mixer, FNet, gMLP)",
        [("num_epochs = 50", "num_epochs = 1", EPOCHS),
         ("(x_train, y_train), (x_test, y_test) = keras.datasets.cifar100.load_data()",
          "(x_train, y_train), (x_test, y_test) = keras.datasets.cifar100.load_data()\n"
          "x_train, y_train, x_test, y_test = x_train[:256], y_train[:256], x_test[:64], y_test[:64]", SMALL)],
        prints=[("Test accuracy", "finite"), ("Test top 5 accuracy", "finite")], group="custom_code"),
    _io("io_endpoint_layer_pattern", "tensorflow/keras_recipes/endpoint_layer_pattern",
        "custom endpoint layer with add_loss/add_metric", group="custom_code"),
    _io("io_antirectifier", "tensorflow/keras_recipes/antirectifier", "custom Layer subclass (keras.ops)",
        group="custom_code"),
    _io("io_timeseries_transformer", "timeseries/timeseries_classification_transformer",
        "time series, transformer encoder with tensor operators (x + inputs)",
        [('readucr(root_url + "FordA_TRAIN.tsv")', 'readucr("FordA_TRAIN.tsv")', DOWNLOAD),
         ('readucr(root_url + "FordA_TEST.tsv")', 'readucr("FordA_TEST.tsv")', DOWNLOAD),
         ("epochs=150", "epochs=1", EPOCHS)],
        files={"FordA_TRAIN.tsv": "forda_train", "FordA_TEST.tsv": "forda_test"},
        group="custom_code"),  # x + inputs: operators on symbolic tensors (issue 22)
    _guide("training_with_built_in_methods", "custom losses, metrics, layers, sample weights, datasets",
           [("x_train.reshape(60000, 784)", "x_train.reshape(512, 784)", SMALL),
            ("x_test.reshape(10000, 784)", "x_test.reshape(1000, 784)", SMALL),
            ("x_val = x_train[-10000:]", "x_val = x_train[-100:]", SMALL),
            ("y_val = y_train[-10000:]", "y_val = y_train[-100:]", SMALL),
            ("x_train = x_train[:-10000]", "x_train = x_train[:-100]", SMALL),
            ("y_train = y_train[:-10000]", "y_train = y_train[:-100]", SMALL)],
           group="custom_code"),
    _guide("functional_api", "functional API incl. custom layers and plot_model",
           [("x_train.reshape(60000, 784)", "x_train.reshape(512, 784)", SMALL),
            ("x_test.reshape(10000, 784)", "x_test.reshape(1000, 784)", SMALL),
            ("keras.applications.VGG19()", "keras.applications.VGG19(weights=None)", IMAGENET_WEIGHTS)],
           group="custom_code"),
    # the guide calls layers and models on data and never trains (trains=False: running to the end is the check)
    _guide("understanding_masking_and_padding", "masking with custom mask-aware layers", group="custom_code",
           trains=False),
    # ---- held-out: ordinary users' training scripts (README: "The held-out group") ----
    _ho("ho_mnist_mlp_cnn", "ho_sn", "mnist.py",
        "MLP and CNN with BatchNormalization, to_categorical, EarlyStopping + ModelCheckpoint(.keras)",
        [("epochs=20", "epochs=1", EPOCHS, 2)]),
    _ho("ho_stock_lstm", "ho_stockbot", "train_lstm_model.py",
        "stacked LSTM on a price series, pandas indicators, MinMaxScaler, EarlyStopping/ModelCheckpoint/"
        "ReduceLROnPlateau, save .keras", [("epochs=100", "epochs=2", EPOCHS)],
        files={"tick_data.csv": "ticks", "charts/.keep": "keep"}),
    _ho("ho_mario_char_lstm", "ho_mario", "rnn.py", "char LSTM on a level file, LambdaCallback, RMSprop(lr=)",
        [("epochs=40", "epochs=1", EPOCHS), ("for i in range(400):", "for i in range(10):", SMALL),
         ("dtype=np.bool)", "dtype=bool)", NUMPY, 2)], files={"level.txt": "mario_level"}),
    _ho("ho_denoising_autoencoder", "ho_ajioz", "denoising/app.py",
        "conv autoencoder, UpSampling2D, evaluate, save .keras", [("epochs=10", "epochs=1", EPOCHS)]),
    _ho("ho_lstm_autoencoder", "ho_ajioz", "anomaly/lstm_autoencoder.py",
        "LSTM autoencoder (RepeatVector, TimeDistributed), validation_split, seaborn, pandas dates",
        [("epochs=30", "epochs=1", EPOCHS)], files={"data/GE.csv": "ge_prices"}),
    _ho("ho_vae_lambda_layer", "ho_ajioz", "timeseries/variational_autoencoder.py",
        "VAE: Lambda sampling with K.random_normal, a custom Layer with add_loss, nested models, fit(x, None)",
        [("epochs = 10", "epochs = 1", EPOCHS), ("x_train[4200][:,:,0]", "x_train[200][:,:,0]", MNIST512),
         ("x_train[42000][:,:,0]", "x_train[400][:,:,0]", MNIST512),
         ("    def vae_loss(self, x, z_decoded):", "    def vae_loss(self, x, z_decoded, z_mu, z_sigma):", KERAS24_CAPTURE),
         ("        loss = self.vae_loss(x, z_decoded)", "        loss = self.vae_loss(x, z_decoded, inputs[2], inputs[3])",
          KERAS24_CAPTURE),
         ("y = CustomLayer()([input_img, z_decoded])", "y = CustomLayer()([input_img, z_decoded, z_mu, z_sigma])",
          KERAS24_CAPTURE)]),
    _ho("ho_credit_fraud_mlp", "ho_fraud", "clf.py",
        "tabular MLP, StandardScaler, TensorBoard callback, to_json, save_weights(.h5)",
        [("epochs=5", "epochs=1", EPOCHS)], files={"creditcard.csv": "creditcard"}),
    _ho("ho_hit_song_mlp", "ho_hitsong", "src/model.py",
        "tabular MLP inside the user's classes, pandas Series labels, joblib", [("model.train(x_train, y_train, 500)",
                                                                               "model.train(x_train, y_train, 2)", EPOCHS)],
        files={"data/dataset-of-10s.csv": "hit_songs"}),
    _ho("ho_wyckoff_lstm", "ho_wyckoff", "model_train_and_test.py",
        "LSTM(relu) binary classifier on OHLC windows, sklearn metrics, save .h5",
        [("epochs=20", "epochs=1", EPOCHS),
         ("pd.read_csv('/content/padded_sequences_augmented_final_data.csv')",
          "pd.read_csv('padded_sequences_augmented_final_data.csv')", HARDCODED_PATH)],
        files={"not_wyckoff_data.csv": "ohlc_sequences", "padded_sequences_augmented_final_data.csv": "wyckoff_padded"}),
    _ho("ho_translation_gru", "ho_translation", "train_model.py",
        "seq2seq text: Tokenizer, pad_sequences, Embedding, Bidirectional GRU, RepeatVector, TimeDistributed",
        [("epochs=5", "epochs=1", EPOCHS)],
        files={"machine_learning_certification/Challenge 7/en.csv": "sentences_en",
               "machine_learning_certification/Challenge 7/fr.csv": "sentences_fr"}),
    _ho("ho_energy_regression", "ho_energy", "main.py",
        "tabular regression, load_model in try/except, EarlyStopping(monitor='MAE'), TensorBoard, save .keras",
        [("epochs=200", "epochs=2", EPOCHS)],
        files={"Data/train_energy_data.csv": "energy_train", "Data/test_energy_data.csv": "energy_test"}),
    _ho("ho_fashion_mlp", "ho_fashion", "make-model.py",
        "Fashion-MNIST MLP, from_logits loss, save .keras", [("epochs=10", "epochs=1", EPOCHS)],
        prints=[("Test accuracy", "prob")]),
    # two more for what the first twelve lacked: ImageDataGenerator.flow_from_directory with transfer learning
    # and fine-tuning; a scikit-learn ColumnTransformer pipeline before a Keras MLP
    _ho("ho_disaster_effnet", "ho_disaster", "predicting_model.py",
        "ImageDataGenerator(preprocessing_function, augmentations, validation_split).flow_from_directory, "
        "EfficientNetB0 base frozen then partly unfrozen, class_weight, AUC, 3 callbacks, save .h5",
        [('DATA_DIR = "C:\\data science\\disaster_predicting\\disasters"', 'DATA_DIR = "disasters"',
          HARDCODED_PATH),
         ("weights='imagenet')", "weights=None)", IMAGENET_WEIGHTS.replace("vgg19_weights_tf_dim_ordering_tf_kernels.h5",
                                                                           "efficientnetb0_notop.h5")
          .replace("548 MB", "16 MB").replace("; the program only looks at the activations' graph, so random weights",
                                              ": random weights")),
         ("EPOCHS = 30", "EPOCHS = 1", EPOCHS), ("fine_tune_epochs = 15", "fine_tune_epochs = 1", EPOCHS)],
        files={"disasters": "disaster_images"}),
    _ho("ho_titanic_pipeline_mlp", "ho_sn", "keras_version.py",
        "scikit-learn ColumnTransformer (impute, scale, one-hot) then a Keras MLP with Input, SGD(learning_rate)",
        [("epochs=100", "epochs=2", EPOCHS)], files={"input/train.csv": "titanic"},
        prints=[("Validation accuracy", "prob")]),
    _ho("ho_crop_yield_multi_input", "ho_crop", "crop_yeild.ipynb",
        "notebook: pandas/seaborn analysis, get_dummies, then a functional two-input model (GRU branch + MLP branch "
        "with l2, Concatenate), 3 callbacks, sklearn metrics", [("epochs=50", "epochs=2", EPOCHS)],
        files={"Dataset/crop_yield.csv": "crop_yield"}),
    _ho("ho_pima_sklearn_cv", "ho_pima", "keras/keras_quick_start.py",
        "keras.wrappers.scikit_learn.KerasClassifier(build_fn) in scikit-learn's cross_val_score (StratifiedKFold)",
        [("epochs=150", "epochs=2", EPOCHS)], files={"../pima-indians-diabetes.data": "pima"}),
    _ho("ho_pima_tensorboard", "ho_pima", "keras/model_training_history.py",
        "MLP, a Callback subclass, TensorBoard with Keras 1/2 arguments (embeddings_layer_names), metrics_names",
        [("epochs=150", "epochs=2", EPOCHS)], files={"../pima-indians-diabetes.data": "pima"}),
    _ho("ho_imdb_text_vectorization", "ho_textclf", "make-model.py",
        "TensorFlow's text classification tutorial as a user ran it: get_file(untar, cache_dir='.'), "
        "text_dataset_from_directory(validation_split, subset), TextVectorization with a tf.strings standardize, "
        "adapt, dataset.map, Embedding + GlobalAveragePooling1D, from_logits", [("epochs = 10", "epochs = 1", EPOCHS)],
        files={"aclImdb_v1.tar.gz": "aclimdb_tar"}),
    _ho("ho_churn_ann", "ho_churn", "experiment.ipynb",
        "notebook: LabelEncoder/OneHotEncoder/StandardScaler pickled, MLP with a loss class (not an instance), "
        "TensorBoard(histogram_freq=1) + EarlyStopping, save .h5", [("epochs=100", "epochs=2", EPOCHS)],
        files={"Churn_Modelling.csv": "churn"}),
    _ho("ho_simple_rnn_sine", "ho_series", "AnalisisSeriesTemporalesRNN.ipynb",
        "notebook: SimpleRNN on a generated series, MinMaxScaler, validation_split, inverse_transform",
        [("epochs=50", "epochs=2", EPOCHS)]),
    _ho("ho_intents_conv1d", "ho_intents", "modle_training.ipynb",
        "notebook: intents JSON, Tokenizer(oov_token), pad_sequences, functional Embedding + Conv1D + "
        "GlobalMaxPooling1D, stratified split, EarlyStopping + ModelCheckpoint", [("epochs=50", "epochs=2", EPOCHS)],
        files={"chatbot_dataset.json": "intents"}),
    _ho("ho_katakana_seq2seq", "ho_katakana", "engtokatakana.ipynb",
        "notebook: character seq2seq, two inputs, Embedding(mask_zero), LSTM initial_state, TimeDistributed, "
        "load_model when the file exists, greedy decoding with predict", [("epochs = 60", "epochs = 1", EPOCHS)],
        files={"trainingdata/joined_titles.csv": "katakana"}),
    _ho("ho_bank_timeseries_generator", "ho_bank", "RNN_model.ipynb",
        "notebook: TimeseriesGenerator batches into fit and validation, LSTM(relu), SGD(momentum), RandomUniform "
        "initializer, RootMeanSquaredError, tf.compat.v1 device query, save .h5", [("epochs=50", "epochs=2", EPOCHS)],
        files={"data.csv": "bank_series"}),
    _ho("ho_amazon_stock_lstm", "ho_amazon", "Amazon_Stock_Price.ipynb",
        "notebook: pandas date features and correlations, stacked LSTM, metrics ['mse', 'r2_score'], "
        "ModelCheckpoint then load_model", [("epochs=30", "epochs=2", EPOCHS)], files={"Amazon_Stock_Price.csv": "amazon"}),
    _ho("ho_windowed_stock_lstm", "ho_windowed", "lstm_msft.ipynb",
        "notebook: windowed pandas frames of a price series, functional-style Sequential with layers.Input, "
        "Adam, mean_absolute_error metric, recursive predictions",
        [("epochs=100", "epochs=2", EPOCHS, 2), ("'2001-07-24'", "'2019-07-24'", SMALL)],
        files={"data/accenture.csv": "accenture"}),
    _ho("ho_house_price_mlp", "ho_house", "108360150_house_pred.py",
        "tabular regression on pandas frames (normalized DataFrames into fit), Adam(epsilon=None, decay=0.0), "
        "loss 'MAE', model.history.history", [("epochs=250", "epochs=2", EPOCHS)],
        files={"csv_data/train-v3.csv": "house_train", "csv_data/valid-v3.csv": "house_valid",
               "csv_data/test-v3.csv": "house_test"}),
    _ho("ho_flow_field_mlp", "ho_flownet", "train.py",
        "regression of a 2-D flow field from an Excel file, LeakyReLU, he_normal, results back to Excel, save "
        ".keras", [("epochs=300", "epochs=2", EPOCHS)], files={"Data.xlsx": "flow_xlsx", "out/.keep": "keep"}),
    _ho("ho_admission_ann", "ho_admission", "graduate-admission-prediction-using-ann.ipynb",
        "notebook: Kaggle admission regression, imports inside try, optimizer 'Adam' by class name, "
        "validation_split, sklearn r2_score, save .keras",
        [('pd.read_csv("D:\\graduate-admission-prediction\\Admission_Predict_Ver1.1.csv")',
          'pd.read_csv("Admission_Predict_Ver1.1.csv")', HARDCODED_PATH), ("epochs=100", "epochs=2", EPOCHS)],
        files={"Admission_Predict_Ver1.1.csv": "admission"}),
    _ho("ho_bitcoin_lstm", "ho_bitcoin", "Test-LSTM.ipynb",
        "notebook: a multi-feature price series with pandas dates, LSTM, mean_absolute_error metric, EarlyStopping, "
        "inverse scaling", [("epochs=50", "epochs=2", EPOCHS),
                            ("sns.scatterplot(x=predictions", "import seaborn as sns\nsns.scatterplot(x=predictions",
                             NOTEBOOK_STATE)],
        files={"data/FBTC-USD-mar-2017-to-06-feb-2023.csv": "bitcoin"}),
]

BY_NAME = {p["name"]: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"

/* prefetch.c: the prefetch thread. It owns the iterator's index stream and materializes
 * elements into a ring of slots, up to buffer_size ahead of the consumer, which holds one more
 * slot (the element it was last given) until its next call. The end of data or an error is a
 * final slot that the consumer keeps returning. */
#include "data/pipeline.h"

#include <pthread.h>
#include <stdio.h>

struct tnt__prefetch {
    tnt_dataset_iter *it;
    pthread_t thread;
    bool started, stop, holding;
    pthread_mutex_t mu;
    pthread_cond_t can_produce, can_consume;
    tnt__slot *slots;
    int64_t nslots, head, filled, tail; /* filled: slots produced and not yet released */
    int part, nparts;
};

static void *producer(void *arg) {
    tnt__prefetch *pf = arg;
    for (;;) {
        pthread_mutex_lock(&pf->mu);
        while (!pf->stop && pf->filled == pf->nslots) pthread_cond_wait(&pf->can_produce, &pf->mu);
        bool stop = pf->stop;
        pthread_mutex_unlock(&pf->mu);
        if (stop) break;
        /* the consumer never touches the slot at tail while it is not counted in filled */
        tnt__slot *s = &pf->slots[pf->tail];
        s->status = tnt__iter_produce(pf->it, pf->part, pf->nparts, s);
        if (s->status < 0) snprintf(s->msg, sizeof s->msg, "%s", tnt_last_error());
        pf->tail = (pf->tail + 1) % pf->nslots;
        pthread_mutex_lock(&pf->mu);
        pf->filled++;
        pthread_cond_signal(&pf->can_consume);
        pthread_mutex_unlock(&pf->mu);
        if (s->status != 1) break;
    }
    return NULL;
}

tnt__prefetch *tnt__prefetch_new(tnt_dataset_iter *it, int64_t buffer_size) {
    /* more slots than elements would never be used */
    if (it->ds->card >= 0) buffer_size = TNT_MIN(buffer_size, it->ds->card + 1);
    tnt__prefetch *pf = tnt__calloc(1, sizeof *pf);
    if (!pf) return NULL;
    pf->it = it;
    pf->nslots = buffer_size + 1;
    pf->slots = tnt__calloc((size_t)pf->nslots, sizeof *pf->slots);
    if (!pf->slots) {
        free(pf);
        return NULL;
    }
    pthread_mutex_init(&pf->mu, NULL);
    pthread_cond_init(&pf->can_produce, NULL);
    pthread_cond_init(&pf->can_consume, NULL);
    for (int64_t i = 0; i < pf->nslots; i++)
        if (tnt__slot_init(it, &pf->slots[i]) != TNT_OK) {
            tnt__prefetch_free(pf);
            return NULL;
        }
    return pf;
}

int tnt__prefetch_next(tnt__prefetch *pf, int part, int nparts, const tnt__slot **out) {
    if (!pf->started) {
        pf->part = part;
        pf->nparts = nparts;
        int e = pthread_create(&pf->thread, NULL, producer, pf);
        if (e) return tnt__error(TNT_ERR_STATE, "prefetch: cannot start the thread: %s", strerror(e));
        pf->started = true;
    } else if (part != pf->part || nparts != pf->nparts) {
        return tnt__error(TNT_ERR_ARG,
                          "prefetch: asked for part %d of %d, but this iterator prefetches part %d of %d",
                          part, nparts, pf->part, pf->nparts);
    }
    pthread_mutex_lock(&pf->mu);
    if (pf->holding) {
        if (pf->slots[pf->head].status == 1) { /* release the element given last time */
            pf->head = (pf->head + 1) % pf->nslots;
            pf->filled--;
            pf->holding = false;
            pthread_cond_signal(&pf->can_produce);
        }
    }
    while (pf->filled == 0) pthread_cond_wait(&pf->can_consume, &pf->mu);
    pf->holding = true;
    const tnt__slot *s = &pf->slots[pf->head];
    pthread_mutex_unlock(&pf->mu);
    *out = s;
    if (s->status < 0) tnt__error(s->status, "%s", s->msg);
    return s->status;
}

void tnt__prefetch_free(tnt__prefetch *pf) {
    if (!pf) return;
    if (pf->started) {
        pthread_mutex_lock(&pf->mu);
        pf->stop = true;
        pthread_cond_broadcast(&pf->can_produce);
        pthread_mutex_unlock(&pf->mu);
        pthread_join(pf->thread, NULL);
    }
    if (pf->slots) {
        for (int64_t i = 0; i < pf->nslots; i++) tnt__slot_release(&pf->slots[i]);
        pthread_mutex_destroy(&pf->mu);
        pthread_cond_destroy(&pf->can_produce);
        pthread_cond_destroy(&pf->can_consume);
    }
    free(pf->slots);
    free(pf);
}

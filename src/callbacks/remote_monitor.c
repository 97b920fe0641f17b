/* remote_monitor.c: the RemoteMonitor callback, an HTTP POST per epoch through libcurl. */
#include "callbacks/callbacks.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct remote_monitor {
    char url[2048], field[128];
    bool send_as_json;
    struct curl_slist *headers;
} remote_monitor;

static size_t discard(void *p, size_t size, size_t n, void *user) {
    (void)p, (void)user;
    return size * n;
}

static tnt_status rm_epoch_end(tnt_model *m, int epoch, const tnt_logs *logs, void *user) {
    (void)m;
    remote_monitor *rm = user;
    cJSON *send = cJSON_CreateObject();
    cJSON_AddNumberToObject(send, "epoch", epoch);
    for (int i = 0; i < logs->n; i++) cJSON_AddNumberToObject(send, logs->names[i], logs->values[i]);
    char *json = cJSON_PrintUnformatted(send);
    cJSON_Delete(send);
    CURL *c = curl_easy_init();
    char *body = NULL, *escaped = NULL;
    if (json && c && !rm->send_as_json && (escaped = curl_easy_escape(c, json, 0))) {
        size_t n = strlen(rm->field) + strlen(escaped) + 2;
        if ((body = malloc(n))) snprintf(body, n, "%s=%s", rm->field, escaped);
    }
    CURLcode rc = CURLE_OUT_OF_MEMORY;
    if (c && json && (rm->send_as_json || body)) {
        struct curl_slist *h = rm->headers;
        struct curl_slist *json_h = rm->send_as_json ? curl_slist_append(NULL, "Content-Type: application/json") : NULL;
        for (struct curl_slist *x = h; x && json_h; x = x->next) json_h = curl_slist_append(json_h, x->data);
        curl_easy_setopt(c, CURLOPT_URL, rm->url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, rm->send_as_json ? json : body);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, json_h ? json_h : h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        rc = curl_easy_perform(c);
        curl_slist_free_all(json_h);
    }
    if (rc != CURLE_OK) /* Keras warns and goes on */
        tnt_log(TNT_LOG_WARNING, "RemoteMonitor: could not reach the root server at %s: %s", rm->url,
                curl_easy_strerror(rc));
    curl_free(escaped);
    free(body);
    cJSON_free(json);
    if (c) curl_easy_cleanup(c);
    return TNT_OK;
}

static void rm_destroy(void *user) {
    remote_monitor *rm = user;
    curl_slist_free_all(rm->headers);
    free(rm);
}

tnt_callback tnt_remote_monitor(const tnt_remote_monitor_opts *opts) {
    tnt_remote_monitor_opts o = opts ? *opts : (tnt_remote_monitor_opts){0};
    const char *root = o.root ? o.root : "http://localhost:9000", *path = o.path ? o.path : "/publish/epoch/end/";
    const char *field = o.field ? o.field : "data";
    remote_monitor *rm = tnt__calloc(1, sizeof *rm);
    if (!rm) return tnt__callback_failed(TNT_ERR_NOMEM);
    if (snprintf(rm->url, sizeof rm->url, "%s%s", root, path) >= (int)sizeof rm->url ||
        snprintf(rm->field, sizeof rm->field, "%s", field) >= (int)sizeof rm->field || !field[0]) {
        free(rm);
        tnt__error(TNT_ERR_ARG, "RemoteMonitor: root + path longer than %zu characters, or a bad field name",
                   sizeof rm->url - 1);
        return tnt__callback_failed(TNT_ERR_ARG);
    }
    rm->send_as_json = o.send_as_json;
    for (const char *const *h = o.headers; h && *h; h++) rm->headers = curl_slist_append(rm->headers, *h);
    static bool curl_ready; /* curl_global_init is not thread-safe: constructors run on the main thread */
    if (!curl_ready) curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    return (tnt_callback){.user = rm, .on_epoch_end = rm_epoch_end, .destroy = rm_destroy, .master_only = true};
}

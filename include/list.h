/* An intrusive doubly linked list (circular, with a head node). */
#ifndef LIST_H
#define LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_node {
	struct list_node *next, *prev;
};

struct list_head {
	struct list_node n;
};

#define LIST_HEAD_INIT(name) { { &(name).n, &(name).n } }
#define LIST_HEAD(name) struct list_head name = LIST_HEAD_INIT(name)

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

static inline void INIT_LIST_HEAD(struct list_head *h)
{
	h->n.next = h->n.prev = &h->n;
}

static inline void INIT_LIST_NODE(struct list_node *n)
{
	n->next = n->prev = n;
}

static inline bool list_empty(const struct list_head *h)
{
	return h->n.next == &h->n;
}

static inline bool list_linked(const struct list_node *n)
{
	return n->next != n && n->next != NULL;
}

static inline void list_insert_between(struct list_node *n, struct list_node *prev,
				       struct list_node *next)
{
	next->prev = n;
	n->next = next;
	n->prev = prev;
	prev->next = n;
}

static inline void list_add(struct list_node *n, struct list_head *h)
{
	list_insert_between(n, &h->n, h->n.next);
}

static inline void list_add_tail(struct list_node *n, struct list_head *h)
{
	list_insert_between(n, h->n.prev, &h->n);
}

static inline void list_del(struct list_node *n)
{
	n->next->prev = n->prev;
	n->prev->next = n->next;
	n->next = n->prev = n;
}

/* move every node of src to the tail of dst, leaving src empty */
static inline void list_splice_tail_init(struct list_head *src, struct list_head *dst)
{
	if (list_empty(src))
		return;
	struct list_node *first = src->n.next, *last = src->n.prev;
	first->prev = dst->n.prev;
	dst->n.prev->next = first;
	last->next = &dst->n;
	dst->n.prev = last;
	INIT_LIST_HEAD(src);
}

#define list_entry(ptr, type, member) container_of(ptr, type, member)
#define list_first_entry(h, type, member) list_entry((h)->n.next, type, member)

#define list_for_each_entry(pos, head, member)                                       \
	for (pos = list_entry((head)->n.next, __typeof__(*pos), member);            \
	     &pos->member != &(head)->n;                                              \
	     pos = list_entry(pos->member.next, __typeof__(*pos), member))

#define list_for_each_entry_safe(pos, tmp, head, member)                             \
	for (pos = list_entry((head)->n.next, __typeof__(*pos), member),            \
	    tmp = list_entry(pos->member.next, __typeof__(*pos), member);           \
	     &pos->member != &(head)->n;                                              \
	     pos = tmp, tmp = list_entry(tmp->member.next, __typeof__(*tmp), member))

#endif

// The part of libxml2's API that ckport uses, declared here rather than through libxml2's own
// headers: those include ICU's, which clash with the ICU that Foundation brings. The
// declarations follow libxml2's public headers (xmlreader.h, parser.h, xmlerror.h); their
// types and values have been stable across libxml2 2.x.
#ifndef CKPORT_LIBXML2_SHIM_H
#define CKPORT_LIBXML2_SHIM_H

typedef unsigned char xmlChar;
typedef struct _xmlTextReader *xmlTextReaderPtr;

// xmlerror.h: struct _xmlError.
typedef struct {
    int domain;
    int code;
    char *message;
    int level;
    char *file;
    int line;
    char *str1;
    char *str2;
    char *str3;
    int int1;
    int int2; // the column
    void *ctxt;
    void *node;
} ckport_xml_error;

// parser.h: xmlParserOption values.
enum {
    CKPORT_XML_PARSE_NOENT = 1 << 1,
    CKPORT_XML_PARSE_DTDLOAD = 1 << 2,
    CKPORT_XML_PARSE_NOERROR = 1 << 5,
    CKPORT_XML_PARSE_NOWARNING = 1 << 6,
    CKPORT_XML_PARSE_NONET = 1 << 11,
    CKPORT_XML_PARSE_NOCDATA = 1 << 14,
};

// xmlreader.h: xmlReaderTypes values.
enum {
    CKPORT_XML_READER_TYPE_ELEMENT = 1,
    CKPORT_XML_READER_TYPE_TEXT = 3,
    CKPORT_XML_READER_TYPE_CDATA = 4,
    CKPORT_XML_READER_TYPE_ENTITY_REFERENCE = 5,
    CKPORT_XML_READER_TYPE_WHITESPACE = 13,
    CKPORT_XML_READER_TYPE_SIGNIFICANT_WHITESPACE = 14,
    CKPORT_XML_READER_TYPE_END_ELEMENT = 15,
};

xmlTextReaderPtr xmlReaderForFile(const char *filename, const char *encoding, int options);
xmlTextReaderPtr xmlReaderForMemory(const char *buffer, int size, const char *URL, const char *encoding, int options);
// xmlIO.h: the callbacks a reader pulls its bytes through.
typedef int (*ckport_xml_read_callback)(void *context, char *buffer, int length);
typedef int (*ckport_xml_close_callback)(void *context);
xmlTextReaderPtr xmlReaderForIO(ckport_xml_read_callback read, ckport_xml_close_callback close, void *context, const char *URL, const char *encoding, int options);
void xmlFreeTextReader(xmlTextReaderPtr reader);
int xmlTextReaderRead(xmlTextReaderPtr reader);
int xmlTextReaderNodeType(xmlTextReaderPtr reader);
int xmlTextReaderDepth(xmlTextReaderPtr reader);
int xmlTextReaderIsEmptyElement(xmlTextReaderPtr reader);
int xmlTextReaderHasAttributes(xmlTextReaderPtr reader);
int xmlTextReaderMoveToNextAttribute(xmlTextReaderPtr reader);
int xmlTextReaderMoveToElement(xmlTextReaderPtr reader);
const xmlChar *xmlTextReaderConstName(xmlTextReaderPtr reader);
const xmlChar *xmlTextReaderConstValue(xmlTextReaderPtr reader);
const xmlChar *xmlTextReaderConstLocalName(xmlTextReaderPtr reader);
const xmlChar *xmlTextReaderConstNamespaceUri(xmlTextReaderPtr reader);
int xmlTextReaderGetParserLineNumber(xmlTextReaderPtr reader);
int xmlTextReaderGetParserColumnNumber(xmlTextReaderPtr reader);
// Returns libxml2's xmlErrorPtr, whose layout ckport_xml_error repeats.
void *xmlTextReaderCurrentNode(xmlTextReaderPtr reader);
// tree.h: the line of a node (an xmlNodePtr) in its document.
long xmlGetLineNo(const void *node);
const ckport_xml_error *xmlGetLastError(void);
void xmlResetLastError(void);

#endif
